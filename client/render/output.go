package render

import (
	"io"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// toolOutput writes a chunk of live output, each line indented (and dim
// with Color). \r\n and \n end lines; a lone \r (a progress bar) returns
// to the start of the line on a terminal and starts a new line otherwise.
func (r *Renderer) toolOutput(o wire.ToolOutput) {
	s := o.Output
	if s == "" {
		return
	}
	if !r.inOutput {
		r.newline()
		r.inOutput, r.outStart = true, true
	}
	r.outCalls[o.CallID] = true
	if r.pendingCR {
		s, r.pendingCR = "\r"+s, false
	}
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		text := s
		if i >= 0 {
			text = s[:i]
		}
		if text != "" {
			if r.outStart {
				r.write(outputIndent)
				r.outStart = false
			}
			r.styled(styleDim, text)
			r.midLine = true
		}
		if i < 0 {
			return
		}
		switch {
		case s[i] == '\n':
			s = s[i+1:]
		case i+1 == len(s): // \r at the end: wait for the next chunk
			r.pendingCR = true
			return
		case s[i+1] == '\n':
			s = s[i+2:]
		default: // a lone \r
			s = s[i+1:]
			if r.color {
				r.write("\r")
				r.outStart, r.midLine = true, false
				continue
			}
		}
		r.write("\n")
		r.outStart, r.midLine = true, false
	}
}

// finishOutput ends a stretch of live tool output.
func (r *Renderer) finishOutput() {
	r.pendingCR = false
	r.inOutput = false
}

// newline ends the current line if the cursor is mid-line.
func (r *Renderer) newline() {
	if r.midLine {
		r.write("\n")
		r.midLine = false
	}
}

// styled writes s in style when Color is set, plainly otherwise.
func (r *Renderer) styled(style, s string) {
	if r.color && s != "" {
		r.write(style + s + styleReset)
		return
	}
	r.write(s)
}

// write writes s unless an earlier write failed; the first error sticks.
func (r *Renderer) write(s string) {
	if r.err != nil || s == "" {
		return
	}
	_, r.err = io.WriteString(r.w, s)
}
