package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// capture keeps the head and the tail of a byte stream in bounded memory,
// counting everything written. It is not safe for concurrent use.
type capture struct {
	headCap, tailCap int
	head, tail       []byte
	total            int64
}

func newCapture(limit int) *capture {
	return &capture{headCap: limit / 2, tailCap: limit - limit/2}
}

// Write keeps p's bytes in the head until it is full, then in the tail,
// which retains only the last tailCap bytes. It never fails.
func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
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

// text returns the captured output for the model, terminal escapes removed
// and line endings normalized, with a marker where bytes were left out; and
// whether anything was left out.
func (c *capture) text() (string, bool) {
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	omitted := c.total - int64(len(c.head)) - int64(len(tail))
	if omitted == 0 {
		return normalize(string(c.head) + string(tail)), false
	}
	head := trimPartialRune(c.head)
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	omitted = c.total - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n... [%d bytes omitted] ...\n%s",
		normalize(string(head)), omitted, normalize(string(tail))), true
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

// normalize makes terminal output readable as text: it drops escape
// sequences (colors, cursor movement), turns CRLF into LF and, where a
// carriage return rewrote a line (progress bars), keeps what a terminal
// would finally show.
func normalize(s string) string {
	s = stripEscapes(s)
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		if j := strings.LastIndexByte(line, '\r'); j >= 0 {
			line = line[j+1:]
		}
		lines[i] = line
	}
	return strings.ToValidUTF8(strings.Join(lines, "\n"), "\uFFFD")
}

// stripEscapes removes ANSI escape sequences: CSI (ESC [ ... final), OSC
// (ESC ] ... BEL or ESC \) and two- or three-byte ESC sequences.
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch s[i] {
		case '[': // CSI: parameter and intermediate bytes, then a final byte
			for i++; i < len(s) && (s[i] < 0x40 || s[i] > 0x7e); i++ {
			}
		case ']': // OSC: up to BEL or ST
			for i++; i < len(s); i++ {
				if s[i] == 0x07 {
					break
				}
				if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
					i++
					break
				}
			}
		default: // ESC, intermediate bytes, final byte
			for ; i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f; i++ {
			}
		}
	}
	return b.String()
}
