package execute

import "io"

// Escape-sequence states of a cleaner.
const (
	stText   = iota
	stEsc    // after ESC
	stEscInt // ESC followed by intermediate bytes
	stCSI    // ESC [ ... up to a final byte
	stOSC    // ESC ] ... up to BEL or ESC \
	stOSCEsc // ESC inside an OSC
)

// maxPendingLine bounds the unfinished line a cleaner holds back.
const maxPendingLine = 8 << 10

// cleaner turns a terminal byte stream into text, incrementally: escape
// sequences (colors, cursor movement, titles) are dropped, CRLF becomes LF,
// and a line rewritten with a bare carriage return (progress bars) keeps
// only what a terminal would finally show. Complete lines go to out at
// once; an unfinished line is held back until its end, FlushLine, or
// maxPendingLine bytes. It is not safe for concurrent use.
type cleaner struct {
	out   io.Writer
	state int
	cr    bool // a carriage return waits for the next byte
	line  []byte
}

// Write cleans p into out. It never fails.
func (c *cleaner) Write(p []byte) (int, error) {
	for _, b := range p {
		c.byte(b)
	}
	if len(c.line) >= maxPendingLine {
		c.FlushLine()
	}
	return len(p), nil
}

func (c *cleaner) byte(b byte) {
	switch c.state {
	case stEsc:
		switch {
		case b == '[':
			c.state = stCSI
		case b == ']':
			c.state = stOSC
		case b >= 0x20 && b <= 0x2f:
			c.state = stEscInt
		default:
			c.state = stText
		}
		return
	case stEscInt:
		if b < 0x20 || b > 0x2f {
			c.state = stText
		}
		return
	case stCSI:
		if b >= 0x40 && b <= 0x7e {
			c.state = stText
		}
		return
	case stOSC:
		switch b {
		case 0x07:
			c.state = stText
		case 0x1b:
			c.state = stOSCEsc
		}
		return
	case stOSCEsc:
		c.state = stOSC
		if b == '\\' {
			c.state = stText
		}
		return
	}
	if b == 0x1b {
		c.state = stEsc
		return
	}
	if c.cr {
		c.cr = false
		if b == '\n' {
			c.endLine()
			return
		}
		c.line = c.line[:0] // the carriage return rewrites the line
	}
	switch b {
	case '\r':
		c.cr = true
	case '\n':
		c.endLine()
	default:
		c.line = append(c.line, b)
	}
}

func (c *cleaner) endLine() {
	c.line = append(c.line, '\n')
	_, _ = c.out.Write(c.line)
	c.line = c.line[:0]
}

// FlushLine writes the unfinished line held back, e.g. a prompt without a
// newline. A carriage return after it can no longer rewrite it.
func (c *cleaner) FlushLine() {
	if len(c.line) > 0 {
		_, _ = c.out.Write(c.line)
		c.line = c.line[:0]
	}
}
