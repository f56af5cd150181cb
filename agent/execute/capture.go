package execute

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/boxwire/boxwire/agent/tool"
)

// capture keeps the head and the tail of a text stream in bounded memory,
// counting every byte and line written. It is not safe for concurrent use.
type capture struct {
	headCap, tailCap int
	head, tail       []byte
	total            int64
	lines            int64 // newlines seen
	last             byte  // the last byte written
}

func newCapture(limit int) *capture {
	return &capture{headCap: limit / 2, tailCap: limit - limit/2}
}

// Write keeps p's bytes in the head until it is full, then in the tail,
// which retains only the last tailCap bytes. It never fails.
func (c *capture) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	c.last = p[len(p)-1]
	n := len(p)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailCap+1 { // amortize: trim only now and then
		// Keep one byte more than the tail: it says whether the tail
		// begins a line.
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailCap-1:]...)
	}
	return n, nil
}

// totalLines counts lines as an editor would: a last line without a
// newline counts too.
func (c *capture) totalLines() int64 {
	if c.total > 0 && c.last != '\n' {
		return c.lines + 1
	}
	return c.lines
}

// text returns the captured text and whether anything was left out. When
// something was, the head ends and the tail begins on a line boundary, and a
// marker between them says how many lines and bytes were left out, naming
// where the full output is when full is not empty. A line longer than a
// half of the limit has no boundary to cut at: it is cut on a character
// boundary, and the marker says so.
func (c *capture) text(full string) (string, bool) {
	tail, prev := c.tail, byte('\n') // prev: the byte before tail
	if len(tail) > c.tailCap {
		prev, tail = tail[len(tail)-c.tailCap-1], tail[len(tail)-c.tailCap:]
	}
	if c.total == int64(len(c.head))+int64(len(tail)) {
		return strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD"), false
	}
	head, midLine := c.head, false
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	} else {
		head, midLine = tool.TrimPartialRune(head), true
	}
	if prev != '\n' {
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		} else {
			midLine = true
		}
	}
	if midLine {
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
	}
	omitted := c.total - int64(len(head)) - int64(len(tail))
	lines := c.lines - int64(bytes.Count(head, []byte{'\n'})) - int64(bytes.Count(tail, []byte{'\n'}))
	note := ""
	if midLine {
		note = ", cutting a line too long to show whole"
	}
	if full != "" {
		note += "; the full output is in " + full
	}
	sep := "\n"
	if len(head) == 0 || head[len(head)-1] == '\n' {
		sep = ""
	}
	return fmt.Sprintf("%s%s... [%d %s, %d bytes omitted%s] ...\n%s",
		strings.ToValidUTF8(string(head), "\uFFFD"), sep, lines, plural(lines, "line", "lines"), omitted, note,
		strings.ToValidUTF8(string(tail), "\uFFFD")), true
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
