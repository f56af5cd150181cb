package tools

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
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
	if len(c.tail) > 2*c.tailCap { // amortize: trim only now and then
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailCap:]...)
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

// text returns the captured text with a marker where bytes were left out,
// naming where the full output is when full is not empty; and whether
// anything was left out.
func (c *capture) text(full string) (string, bool) {
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	omitted := c.total - int64(len(c.head)) - int64(len(tail))
	if omitted == 0 {
		return strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD"), false
	}
	head := trimPartialRune(c.head)
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	omitted = c.total - int64(len(head)) - int64(len(tail))
	where := ""
	if full != "" {
		where = "; the full output is in " + full
	}
	return fmt.Sprintf("%s\n... [%d bytes omitted%s] ...\n%s",
		strings.ToValidUTF8(string(head), "\uFFFD"), omitted, where,
		strings.ToValidUTF8(string(tail), "\uFFFD")), true
}

// trimPartialRune drops an incomplete UTF-8 character from the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
