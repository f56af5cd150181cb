package cli

import (
	"flag"
	"io"

	"github.com/boxwire/boxwire/bridge/wire"
)

// LineEditor is the line editor the interactive chat uses on a terminal.
type LineEditor = lineEditor

// NewLineEditor returns a line editor over rw for a terminal of width
// columns, without history.
func NewLineEditor(rw io.ReadWriter, prompt string, width int) *LineEditor {
	l := newLineEditor(rw, prompt, nil)
	_ = l.SetSize(width, 24)
	return l
}

// CreateRequest parses args as the client's new-thread flags and returns
// the create_thread request they ask for, and the image to move an
// existing thread to.
func CreateRequest(args []string) (*wire.CreateThread, string, error) {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f createFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	req, err := f.request()
	return req, f.moveImage(), err
}
