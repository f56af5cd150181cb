package term

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxwire/boxwire/bridge/wire"
)

// relay runs one Run: it attaches, then moves keystrokes, resizes and
// events until one of them ends the run.
type relay struct {
	o    Options
	conn *Conn
	view *view

	escaped bool // the last key was DetachPrefix
}

// action is what a chunk of keystrokes asks for besides its bytes.
type action int

const (
	keepGoing action = iota
	detach
	closeSession
)

// run attaches and relays; it returns the exit code and a message for Err.
func (r *relay) run(ctx context.Context) (int, string) {
	session, err := r.attach(ctx)
	if err != nil {
		return ExitUsage, fmt.Sprintf("boxwire: %v", err)
	}
	keys := make(chan []byte)
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	_, isFile := r.o.In.(*os.File)
	defer func() {
		close(quit)
		if isFile { // it polls, so it ends within pollEvery: wait, so that
			<-readerDone // the next reader of the terminal gets every key
		}
	}()
	// Ends at In's EOF or error, or at the next chunk after run returns;
	// a Read in progress on a non-file cannot be cancelled (see Options.In).
	go func() {
		defer close(readerDone)
		readKeys(r.o.In, keys, quit)
	}()
	for {
		select {
		case chunk, ok := <-keys:
			if !ok {
				return r.leave(session, "input ended; detached from")
			}
			data, act := r.filter(chunk)
			if len(data) > 0 {
				if err := r.conn.Input(ctx, session, data); err != nil {
					return r.lost(ctx)
				}
			}
			switch act {
			case detach:
				return r.leave(session, "detached from")
			case closeSession:
				if code, msg, ok := r.closeSession(session); ok {
					return code, msg
				}
			}
		case <-r.o.Resizes:
			r.resize(ctx, session)
		case code := <-r.view.exited:
			return code, fmt.Sprintf("[session %s exited with status %d]", session, code)
		case <-r.view.slow:
			if _, err := r.conn.Attach(ctx, session); err != nil {
				return ExitUsage, fmt.Sprintf("boxwire: reattach after falling behind: %v", err)
			}
		case <-r.conn.Done():
			return r.lost(ctx)
		case <-ctx.Done():
			code, msg := r.leave(session, "interrupted; detached from")
			if code == ExitOK {
				code = ExitInterrupted
			}
			return code, msg
		}
	}
}

// attach opens or attaches the session at the local terminal's size.
func (r *relay) attach(ctx context.Context) (string, error) {
	cols, rows := r.size()
	actx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if r.o.Session == "" {
		a, err := r.conn.Open(actx, wire.TerminalOpen{Command: r.o.Command, Cols: cols, Rows: rows})
		return a.Session, err
	}
	a, err := r.conn.Attach(actx, r.o.Session)
	if err != nil {
		return "", err
	}
	if cols > 0 && (a.Cols != cols || a.Rows != rows) {
		// Last resize wins: the session takes this terminal's size.
		if err := r.conn.Resize(actx, a.Session, cols, rows); err != nil {
			return "", err
		}
	}
	return a.Session, nil
}

// size is the local terminal's size, or 0, 0 without one.
func (r *relay) size() (cols, rows uint16) {
	if r.o.TTY == nil {
		return 0, 0
	}
	cols, rows, err := Size(r.o.TTY)
	if err != nil {
		return 0, 0
	}
	return cols, rows
}

func (r *relay) resize(ctx context.Context, session string) {
	if cols, rows := r.size(); cols > 0 && rows > 0 {
		_ = r.conn.Resize(ctx, session, cols, rows) // a loss shows on Done
	}
}

// filter takes the detach keys out of chunk.
func (r *relay) filter(chunk []byte) ([]byte, action) {
	if !r.escaped && bytes.IndexByte(chunk, DetachPrefix) < 0 {
		return chunk, keepGoing
	}
	out := make([]byte, 0, len(chunk)+1)
	for _, b := range chunk {
		switch {
		case !r.escaped && b == DetachPrefix:
			r.escaped = true
		case !r.escaped:
			out = append(out, b)
		default:
			r.escaped = false
			switch b {
			case 'q', 'Q', 'd', 'D':
				return out, detach
			case 'k', 'K':
				return out, closeSession
			case DetachPrefix:
				out = append(out, DetachPrefix)
			default:
				out = append(out, DetachPrefix, b)
			}
		}
	}
	return out, keepGoing
}

// leave detaches from session (bounded) and says so.
func (r *relay) leave(session, what string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := r.conn.Detach(ctx, session); err != nil && !errors.Is(err, ErrClosed) {
		return ExitUsage, fmt.Sprintf("boxwire: detach: %v", err)
	}
	return ExitOK, fmt.Sprintf("[%s %s on thread %s; reattach: client shell --thread %s --session %s]",
		what, session, r.conn.Thread(), r.conn.Thread(), session)
}

// closeSession ends the session and reports its exit, which watchers get
// before the answer; ok is false when the answer did not come (a lost
// connection then shows on Done).
func (r *relay) closeSession(session string) (code int, msg string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := r.conn.CloseSession(ctx, session); err != nil {
		return 0, "", false
	}
	select {
	case code = <-r.view.exited:
	default: // already exited before: no second terminal_exit
	}
	return code, fmt.Sprintf("[session %s closed; exit status %d]", session, code), true
}

// lost reports a lost connection, or ctx's end when that caused it.
func (r *relay) lost(ctx context.Context) (int, string) {
	if ctx.Err() != nil {
		return ExitInterrupted, "[interrupted]"
	}
	return ExitUsage, fmt.Sprintf("boxwire: connection lost: %v", r.conn.Err())
}

// readKeys sends each chunk read from in to keys; it closes keys at EOF or
// a read error, or returns when quit is closed.
func readKeys(in io.Reader, keys chan<- []byte, quit <-chan struct{}) {
	defer close(keys)
	if in == nil {
		<-quit
		return
	}
	f, isFile := in.(*os.File)
	for {
		if isFile && !readable(f, quit) {
			return // quit: no Read is left blocked on the file
		}
		select {
		case <-quit:
			return // detached meanwhile: leave the keys to the next reader
		default:
		}
		buf := make([]byte, 4096)
		n, err := in.Read(buf)
		if n > 0 {
			select {
			case keys <- buf[:n]:
			case <-quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pollEvery bounds how long readable waits before it looks at quit again.
const pollEvery = 50 * time.Millisecond

// readable waits until f has input (true) or quit is closed (false). A
// terminal read cannot be cancelled, so polling first is what keeps a
// detached shell from leaving a Read that would steal the chat's next
// keystrokes.
func readable(f *os.File, quit <-chan struct{}) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	for {
		select {
		case <-quit:
			return false
		default:
		}
		n, err := unix.Poll(fds, int(pollEvery/time.Millisecond))
		if err == nil && n > 0 || err != nil && err != unix.EINTR {
			return true // readable, or let Read report the error
		}
	}
}
