package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/render"
)

// Exit codes of Run and Copy. Scripts may rely on them.
const (
	// ExitOK: the turn ended with reason stop, the user left (Ctrl-D), or
	// a copy transferred every file.
	ExitOK = 0
	// ExitTurnFailed: an error event, a turn that ended with reason error
	// or step_limit, or a copy where some files failed.
	ExitTurnFailed = 1
	// ExitUsage: bad usage, a refused request, or the connection failed
	// or was lost (and could not be re-established).
	ExitUsage = 2
	// ExitInterrupted: the turn was interrupted, or Ctrl-C at the prompt.
	ExitInterrupted = 130
)

const (
	// defaultDialTimeout bounds connecting, which on a bridge includes
	// starting the thread's sandbox.
	defaultDialTimeout = 2 * time.Minute
	// defaultReconnectTimeout bounds re-establishing a dropped connection.
	defaultReconnectTimeout = 2 * time.Minute
	// maxBackoff caps the pause between reconnect attempts.
	maxBackoff = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Chat says where to connect.
	Chat chat.Config
	// Message, when not empty, makes Run play this one turn and return.
	Message string
	// Seed, when set, is a local file or folder uploaded into the
	// workspace right after connecting, before any turn.
	Seed string
	// JSON prints every message from the server as one JSON line on Out
	// instead of rendering it.
	JSON bool
	// In gives the interactive mode's lines; its EOF (Ctrl-D) ends Run.
	In io.Reader
	// Out receives the conversation; Err receives connection problems.
	Out, Err io.Writer
	// Progress, when set (a terminal), shows transfer progress bars.
	Progress io.Writer
	// Color styles Out for a terminal: markdown answers, a status line.
	Color bool
	// Editor, when In and Out are terminals (*os.File), reads the
	// interactive chat's lines with a line editor (arrows, history) and
	// folds live tool output; Out and Err then go through it. A second
	// Ctrl-C at the prompt (or Ctrl-D) leaves.
	Editor bool
	// HistoryFile keeps the line editor's history across runs; empty
	// keeps it in memory.
	HistoryFile string
	// Interrupts delivers Ctrl-C: during a turn it sends interrupt (a
	// second one gives up waiting for the turn to end); while connecting or
	// at the prompt it ends Run. May be nil.
	Interrupts <-chan os.Signal
	// Shell, when set, runs /shell ARGS on thread (client/term) and
	// returns when the user leaves the terminal. May be nil.
	Shell func(ctx context.Context, thread string, args []string) int
	// DialTimeout bounds connecting; 0 means 2 minutes.
	DialTimeout time.Duration
	// ReconnectTimeout bounds re-establishing a dropped connection; 0
	// means 2 minutes.
	ReconnectTimeout time.Duration
	// Approvals says how approval requests are answered: ApprovalsAsk
	// (default), ApprovalsAutoApprove or ApprovalsAutoDeny (approval.go).
	Approvals string
}

// Run connects and runs the one-shot turn or the interactive chat, and
// returns the process exit code. It blocks until the turn ends (one-shot),
// the input ends or the user interrupts at the prompt (interactive), the
// connection is lost for good, or ctx ends. A dropped connection is
// re-established silently, resuming after the last event seen. Run closes
// its connection before it returns.
func Run(ctx context.Context, o Options) int {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
	conn, code := dial(ctx, o, o.Chat)
	if conn == nil {
		return code
	}
	s := &session{o: o, conn: conn, sandbox: wire.SandboxRunning}
	if ed := s.startEditor(); ed != nil {
		defer ed.Close()
	}
	s.r = render.New(s.o.Out, render.Options{Color: s.o.Color, Fold: s.ed != nil, Width: s.width})
	defer func() { s.current().Close() }()
	if o.Seed != "" {
		s.transferCommand(ctx, "/upload", []string{o.Seed})
	}
	if o.Message != "" {
		code, _ := s.turn(ctx, o.Message)
		return code
	}
	return s.interactive(ctx)
}

// dial connects with cfg, giving up on ctx's end, the dial timeout or an
// interrupt.
func dial(ctx context.Context, o Options, cfg chat.Config) (*chat.Conn, int) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var interrupted bool
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-o.Interrupts:
			interrupted = true
			cancel()
		case <-dctx.Done():
		}
	})
	conn, err := chat.Dial(dctx, cfg)
	cancel()
	wg.Wait()
	switch {
	case err == nil:
		return conn, ExitOK
	case interrupted:
		fmt.Fprintln(o.Err, "boxwire: interrupted while connecting")
		return nil, ExitInterrupted
	case errors.Is(err, chat.ErrUnauthorized):
		fmt.Fprintf(o.Err, "boxwire: %v\nboxwire: check --token or $BOXWIRE_TOKEN\n", err)
		return nil, ExitUsage
	default:
		fmt.Fprintf(o.Err, "boxwire: %v\n", err)
		return nil, ExitUsage
	}
}

// session is one run: its current connection (replaced on reconnect and
// by /new and /attach), renderer and transcript.
type session struct {
	o  Options
	r  *render.Renderer
	ed *editor // the line editor, nil for plain input

	approvalIn *bufio.Reader // verdict lines from In (approval.go)
	lines      <-chan string // the interactive chat's input lines (approval.go)
	asked      []string      // approval ids still open, newest last (approval.go)

	mu   sync.Mutex
	conn *chat.Conn

	transcript []wire.Envelope // every event seen, for /export
	usage      int             // total tokens of the turns seen
	requests   int             // model calls (from the bridge's usage events)
	budget     int             // the thread's token budget (0: none)
	bridgeUse  bool            // usage comes from the bridge's usage events
	sandbox    string          // sandbox state for the status line
}

func (s *session) current() *chat.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

func (s *session) setConn(c *chat.Conn) {
	s.mu.Lock()
	old := s.conn
	s.conn = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.Close()
	}
}

// show renders or prints one message and records events for /export.
func (s *session) show(env wire.Envelope, own bool) {
	if env.Seq != 0 {
		s.transcript = append(s.transcript, env)
	}
	s.track(env)
	if s.o.JSON {
		data, err := wire.Marshal(env)
		if err == nil {
			fmt.Fprintf(s.o.Out, "%s\n", data)
		}
		s.approval(env) // approval.go: reads a verdict line
		return
	}
	if own && env.Type == wire.TypeUserEcho {
		return // the user just typed it
	}
	s.r.Render(env)
	s.approval(env) // approval.go: prompt for approval_request
}

// reconnect replaces a dropped connection with a new one on the same
// thread, resuming after the last event seen; it retries with backoff
// until ReconnectTimeout, ctx's end or an interrupt, and reports success.
func (s *session) reconnect(ctx context.Context) bool {
	old := s.current()
	cfg := s.o.Chat
	cfg.Thread, cfg.AfterSeq = old.Thread(), old.LastSeq()
	timeout := s.o.ReconnectTimeout
	if timeout <= 0 {
		timeout = defaultReconnectTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		c, err := chat.Dial(rctx, cfg)
		if err == nil {
			s.setConn(c)
			return true
		}
		var werr wire.Error
		if errors.Is(err, chat.ErrUnauthorized) || (errors.As(err, &werr) && werr.Code == wire.CodeNotFound) {
			fmt.Fprintf(s.o.Err, "boxwire: reconnect: %v\n", err)
			return false
		}
		select {
		case <-rctx.Done():
			fmt.Fprintf(s.o.Err, "boxwire: reconnect: %v\n", err)
			return false
		case <-s.o.Interrupts:
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// turn plays one turn and maps its outcome to an exit code; fatal says the
// connection is unusable (or the user gave up) and Run must return.
func (s *session) turn(ctx context.Context, text string) (code int, fatal bool) {
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var gaveUp bool
	wg.Go(func() { gaveUp = s.watchInterrupts(tctx, stop) })
	id, err := s.current().SendMessage(tctx, text)
	var done wire.TurnDone
	for err == nil {
		done, err = s.current().Await(tctx, id, func(env wire.Envelope) { s.show(env, true) })
		if err == nil || tctx.Err() != nil || s.current().Err() == nil || !s.reconnect(tctx) {
			break
		}
		err = nil // reconnected: wait for the rest of the turn
	}
	stop()
	wg.Wait()
	if rerr := s.r.EndLine(); rerr != nil {
		fmt.Fprintf(s.o.Err, "boxwire: write output: %v\n", rerr)
		return ExitUsage, true
	}
	var werr wire.Error
	switch {
	case done.Reason == wire.ReasonInterrupted:
		return ExitInterrupted, false
	case err == nil && done.Reason == wire.ReasonStop:
		s.status()
		return ExitOK, false
	case err == nil || errors.As(err, &werr):
		return ExitTurnFailed, false // the renderer has shown why
	case gaveUp:
		fmt.Fprintln(s.o.Err, "boxwire: the turn did not end after interrupt; giving up")
		return ExitInterrupted, true
	case ctx.Err() != nil:
		return ExitInterrupted, true
	default:
		fmt.Fprintf(s.o.Err, "boxwire: connection lost: %v\n", err)
		return ExitUsage, true
	}
}

// watchInterrupts sends interrupt on the first Ctrl-C of a turn and calls
// giveUp on the second; it returns whether it gave up, once ctx ends.
func (s *session) watchInterrupts(ctx context.Context, giveUp context.CancelFunc) bool {
	sent := false
	for {
		select {
		case <-ctx.Done():
			return false
		case <-s.o.Interrupts:
			if sent {
				giveUp()
				return true
			}
			sent = true
			if err := s.current().Interrupt(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(s.o.Err, "boxwire: interrupt: %v\n", err)
			}
		}
	}
}
