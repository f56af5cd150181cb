package cli

import (
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

// Exit codes of Run.
const (
	// ExitOK: the turn ended with reason stop, or the user left (Ctrl-D).
	ExitOK = 0
	// ExitTurnFailed: an error event, or a turn that ended with reason
	// error or step_limit.
	ExitTurnFailed = 1
	// ExitUsage: bad usage, or the connection failed or was lost.
	ExitUsage = 2
	// ExitInterrupted: the turn was interrupted, or Ctrl-C at the prompt.
	ExitInterrupted = 130
)

// defaultDialTimeout bounds connecting, which on a bridge includes
// starting the thread's sandbox.
const defaultDialTimeout = 2 * time.Minute

// Options configure Run.
type Options struct {
	// Chat says where to connect.
	Chat chat.Config
	// Message, when not empty, makes Run play this one turn and return.
	Message string
	// In gives the interactive mode's lines; its EOF (Ctrl-D) ends Run.
	In io.Reader
	// Out receives the conversation; Err receives connection problems.
	Out, Err io.Writer
	// Color styles Out for a terminal.
	Color bool
	// Interrupts delivers Ctrl-C: during a turn it sends interrupt (a
	// second one gives up waiting for the turn to end); while connecting or
	// at the prompt it ends Run. May be nil.
	Interrupts <-chan os.Signal
	// DialTimeout bounds connecting; 0 means 2 minutes.
	DialTimeout time.Duration
}

// Run connects and runs the one-shot turn or the interactive chat, and
// returns the process exit code. It blocks until the turn ends (one-shot),
// the input ends or the user interrupts at the prompt (interactive), the
// connection is lost, or ctx ends. Run closes its connection before it
// returns.
func Run(ctx context.Context, o Options) int {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
	conn, code := dial(ctx, o)
	if conn == nil {
		return code
	}
	defer conn.Close()
	s := &session{o: o, conn: conn, r: render.New(o.Out, render.Options{Color: o.Color})}
	if o.Message != "" {
		code, _ := s.turn(ctx, o.Message)
		return code
	}
	return s.interactive(ctx)
}

// dial connects, giving up on ctx's end, the dial timeout or an interrupt.
func dial(ctx context.Context, o Options) (*chat.Conn, int) {
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
	conn, err := chat.Dial(dctx, o.Chat)
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

// session is one connected run.
type session struct {
	o    Options
	conn *chat.Conn
	r    *render.Renderer
}

// turn plays one turn and maps its outcome to an exit code; fatal says the
// connection is unusable (or the user gave up) and Run must return.
func (s *session) turn(ctx context.Context, text string) (code int, fatal bool) {
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var gaveUp bool
	wg.Go(func() { gaveUp = s.watchInterrupts(tctx, stop) })
	done, err := s.conn.Run(tctx, text, func(env wire.Envelope) {
		if env.Type != wire.TypeUserEcho { // the user just typed it
			s.r.Render(env)
		}
	})
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
		return ExitOK, false
	case err == nil || errors.As(err, &werr):
		return ExitTurnFailed, false // the renderer has shown why
	case gaveUp:
		fmt.Fprintln(s.o.Err, "boxwire: the turn did not end after interrupt; giving up")
		return ExitInterrupted, true
	case ctx.Err() != nil:
		return ExitInterrupted, true
	default:
		fmt.Fprintf(s.o.Err, "boxwire: connection lost: %v\n", s.conn.Err())
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
			if err := s.conn.Interrupt(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(s.o.Err, "boxwire: interrupt: %v\n", err)
			}
		}
	}
}
