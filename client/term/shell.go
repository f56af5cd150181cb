package term

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Exit codes of Run and Main besides the session's own exit status.
const (
	ExitOK          = 0   // detached; the session goes on
	ExitUsage       = 2   // bad usage, a refused request, or the connection failed or was lost
	ExitInterrupted = 130 // a signal ended the client; the session goes on
)

// Detach keys: DetachPrefix, then one of the keys below.
const (
	// DetachPrefix is Ctrl-]. After it: q or d detaches, k closes the
	// session, and Ctrl-] sends a literal Ctrl-]; any other key is sent
	// after the prefix.
	DetachPrefix = 0x1d
	// KeysHelp is the one-line reminder Run prints before attaching.
	KeysHelp = "Ctrl-] q detaches, Ctrl-] k closes the session"
)

// timeouts of Run.
const (
	defaultDialTimeout = 2 * time.Minute
	requestTimeout     = 30 * time.Second
)

// restoreSequence leaves what a remote full-screen program may have left
// on: alternate screen, hidden cursor, mouse reporting, bracketed paste,
// application cursor keys and styles.
const restoreSequence = "\x1b[0m\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1l\x1b>\x1b[?1049l"

// Options configure Run.
type Options struct {
	// Chat says where to connect; Chat.Thread is the thread (empty: a new one).
	Chat chat.Config
	// Session is the session to attach to; empty opens a new one running
	// Command (empty: a login shell).
	Session string
	Command []string
	// In gives keystrokes. An *os.File is polled before each Read, so Run
	// leaves no Read on it when it returns; on any other reader Run does
	// not wait for a Read in progress.
	In io.Reader
	// Out receives the terminal's output; Err, Run's own messages.
	Out, Err io.Writer
	// TTY, when set, is the local terminal: Run puts it in raw mode (and
	// restores it on every exit path) and follows its size.
	TTY *os.File
	// Resizes delivers SIGWINCH; may be nil.
	Resizes <-chan os.Signal
	// DialTimeout bounds connecting; 0 means 2 minutes.
	DialTimeout time.Duration
}

// Run opens or attaches a terminal session and relays it to the local
// terminal until the user detaches (Ctrl-] q: ExitOK), the session exits
// (its exit status), the connection is lost (ExitUsage) or ctx ends
// (ExitInterrupted). The local terminal is restored before Run returns or
// panics. Run closes its connection; the session outlives it.
func Run(ctx context.Context, o Options) (code int) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
	v := &view{out: o.Out, session: o.Session, exited: make(chan int, 1), slow: make(chan struct{}, 1)}
	conn, err := dial(ctx, o, v)
	if err != nil {
		fmt.Fprintf(o.Err, "boxwire: %v\n", err)
		return ExitUsage
	}
	defer conn.Close()
	restore := func() {}
	if o.TTY != nil && IsTerminal(o.TTY) {
		r, err := MakeRaw(o.TTY)
		if err != nil {
			fmt.Fprintf(o.Err, "boxwire: %v\n", err)
			return ExitUsage
		}
		restore = func() {
			conn.Close() // no more output after the reset
			fmt.Fprint(o.Out, restoreSequence)
			_ = r()
		}
		defer restore() // panics, too
	}
	r := &relay{o: o, conn: conn, view: v}
	code, msg := r.run(ctx)
	restore()
	if msg != "" {
		fmt.Fprintf(o.Err, "\r\n%s\n", msg)
	}
	return code
}

func dial(ctx context.Context, o Options, h Handler) (*Conn, error) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Dial(dctx, o.Chat, h)
}

// view is the Handler of Run: it draws the session's screen and output.
type view struct {
	out io.Writer

	mu      sync.Mutex
	session string // "" until opened

	exited chan int      // the session's exit status, once
	slow   chan struct{} // detached as too slow: attach again
}

func (v *view) current() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.session
}

func (v *view) Output(session string, data []byte) {
	if session == v.current() {
		_, _ = v.out.Write(data)
	}
}

func (v *view) Message(env wire.Envelope) {
	switch env.Type {
	case wire.TypeTerminalAttached:
		var a wire.TerminalAttached
		if env.Decode(&a) != nil {
			return
		}
		v.mu.Lock()
		if v.session == "" {
			v.session = a.Session
		}
		mine := a.Session == v.session
		v.mu.Unlock()
		if mine {
			_, _ = io.WriteString(v.out, a.Screen)
		}
	case wire.TypeTerminalExit:
		var x wire.TerminalExit
		if env.Decode(&x) == nil && x.Session == v.current() {
			select {
			case v.exited <- x.ExitCode:
			default:
			}
		}
	case wire.TypeTerminalDetached:
		var d wire.TerminalDetached
		if env.Decode(&d) == nil && d.Session == v.current() && d.Reason == wire.DetachTooSlow {
			select {
			case v.slow <- struct{}{}:
			default:
			}
		}
	}
}
