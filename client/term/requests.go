package term

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Open starts a terminal session and attaches this connection to it. It
// blocks until terminal_attached (the Handler has seen it, and its Screen,
// before Open returns; output frames follow), an error reply, the
// connection's end or ctx's end.
func (c *Conn) Open(ctx context.Context, o wire.TerminalOpen) (wire.TerminalAttached, error) {
	return c.attached(ctx, wire.TypeTerminalOpen, o)
}

// Attach watches an existing session. It blocks like Open; the reply's
// Screen redraws the session's current screen and live output follows. An
// unknown session is a wire.Error with code not_found.
func (c *Conn) Attach(ctx context.Context, session string) (wire.TerminalAttached, error) {
	return c.attached(ctx, wire.TypeTerminalAttach, wire.TerminalRef{Session: session})
}

func (c *Conn) attached(ctx context.Context, typ wire.Type, payload any) (wire.TerminalAttached, error) {
	env, err := c.request(ctx, typ, payload)
	if err != nil {
		return wire.TerminalAttached{}, err
	}
	var a wire.TerminalAttached
	if err := env.Decode(&a); err != nil {
		return a, fmt.Errorf("%s: %w", typ, err)
	}
	return a, nil
}

// Detach stops watching session (it goes on running) and waits for the
// answer.
func (c *Conn) Detach(ctx context.Context, session string) error {
	_, err := c.request(ctx, wire.TypeTerminalDetach, wire.TerminalRef{Session: session})
	return err
}

// CloseSession ends session (its process group is stopped) and waits for
// the answer; watchers get terminal_exit first.
func (c *Conn) CloseSession(ctx context.Context, session string) error {
	_, err := c.request(ctx, wire.TypeTerminalClose, wire.TerminalRef{Session: session})
	return err
}

// List returns the sessions of the thread (or standalone agent).
func (c *Conn) List(ctx context.Context) ([]wire.TerminalInfo, error) {
	env, err := c.request(ctx, wire.TypeTerminalList, nil)
	if err != nil {
		return nil, err
	}
	var s wire.TerminalSessions
	if err := env.Decode(&s); err != nil {
		return nil, fmt.Errorf("terminal_list: %w", err)
	}
	return s.Sessions, nil
}

// Resize sets session's window size. It waits only until the request is
// written: a failure arrives later as an error message (Handler.Message).
func (c *Conn) Resize(ctx context.Context, session string, cols, rows uint16) error {
	return c.sendJSON(ctx, wire.MustNew(wire.TypeTerminalResize, "", c.conn.NewID("r"),
		wire.TerminalResize{Session: session, Cols: cols, Rows: rows}))
}

// Signal sends sig (INT, TERM, HUP, KILL, …) to session's process group.
// It waits like Resize.
func (c *Conn) Signal(ctx context.Context, session, sig string) error {
	return c.sendJSON(ctx, wire.MustNew(wire.TypeTerminalSignal, "", c.conn.NewID("s"),
		wire.TerminalSignal{Session: session, Signal: sig}))
}

// Input sends data to session as keystrokes, in binary frames of at most
// wire.MaxFrameData bytes. It blocks until every frame is written, the
// connection ends or ctx ends. Input from several goroutines may
// interleave between frames.
func (c *Conn) Input(ctx context.Context, session string, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), wire.MaxFrameData)
		frame, err := wire.AppendFrame(nil, wire.FrameInput, session, data[:n])
		if err != nil {
			return fmt.Errorf("terminal input: %w", err)
		}
		if err := c.conn.SendBinary(ctx, frame); err != nil {
			return fmt.Errorf("terminal input: %w", err)
		}
		data = data[n:]
	}
	return nil
}
