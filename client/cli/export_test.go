package cli

import "io"

// LineEditor is the line editor the interactive chat uses on a terminal.
type LineEditor = lineEditor

// NewLineEditor returns a line editor over rw for a terminal of width
// columns, without history.
func NewLineEditor(rw io.ReadWriter, prompt string, width int) *LineEditor {
	l := newLineEditor(rw, prompt, nil)
	_ = l.SetSize(width, 24)
	return l
}
