package e2e_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/term"
)

// termTimeout bounds one terminal wait (a request, output, an exit).
const termTimeout = 60 * time.Second

// termRecorder is the term.Handler of a test connection: it keeps every
// session's output (or only counts it) and every message.
type termRecorder struct {
	countOnly bool

	mu      sync.Mutex
	out     map[string]*bytes.Buffer
	n       map[string]int64
	frames  map[string]int64 // output frames per session
	msgs    []wire.Envelope
	changed chan struct{} // a token after every change, capacity 1
}

func newTermRecorder(countOnly bool) *termRecorder {
	return &termRecorder{countOnly: countOnly, out: map[string]*bytes.Buffer{}, n: map[string]int64{}, frames: map[string]int64{}, changed: make(chan struct{}, 1)}
}

func (r *termRecorder) Output(session string, data []byte) {
	r.mu.Lock()
	r.n[session] += int64(len(data))
	r.frames[session]++
	if !r.countOnly {
		if r.out[session] == nil {
			r.out[session] = &bytes.Buffer{}
		}
		r.out[session].Write(data)
	}
	r.mu.Unlock()
	r.notify()
}

func (r *termRecorder) Message(env wire.Envelope) {
	r.mu.Lock()
	r.msgs = append(r.msgs, env)
	r.mu.Unlock()
	r.notify()
}

func (r *termRecorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// termConn is a test's terminal connection to a thread.
type termConn struct {
	t    *testing.T
	conn *term.Conn
	rec  *termRecorder
	pos  map[string]int // how far expect has consumed each session's output
	msgI int            // how far awaitMsg has consumed the messages
}

// dialTerm opens a terminal connection to thread ("" makes a new one).
func (e *env) dialTerm(thread string, countOnly bool) *termConn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	rec := newTermRecorder(countOnly)
	conn, err := term.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread}, rec)
	if err != nil {
		e.t.Fatalf("dial terminal connection: %v\nbridge log:\n%s", err, e.bridge.logText())
	}
	e.t.Cleanup(func() { conn.Close() })
	return &termConn{t: e.t, conn: conn, rec: rec, pos: map[string]int{}}
}

func (c *termConn) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), termTimeout)
}

// open starts a session (nil command: a login shell).
func (c *termConn) open(command []string, cols, rows uint16) wire.TerminalAttached {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	a, err := c.conn.Open(ctx, wire.TerminalOpen{Command: command, Cols: cols, Rows: rows})
	if err != nil {
		c.t.Fatalf("open terminal: %v", err)
	}
	return a
}

func (c *termConn) attach(session string) wire.TerminalAttached {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	a, err := c.conn.Attach(ctx, session)
	if err != nil {
		c.t.Fatalf("attach %s: %v", session, err)
	}
	c.mark(session)
	return a
}

func (c *termConn) detach(session string) {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.conn.Detach(ctx, session); err != nil {
		c.t.Fatalf("detach %s: %v", session, err)
	}
}

func (c *termConn) list() []wire.TerminalInfo {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	l, err := c.conn.List(ctx)
	if err != nil {
		c.t.Fatalf("list terminals: %v", err)
	}
	return l
}

// input types text into session.
func (c *termConn) input(session, text string) {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.conn.Input(ctx, session, []byte(text)); err != nil {
		c.t.Fatalf("input to %s: %v", session, err)
	}
}

func (c *termConn) resize(session string, cols, rows uint16) {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.conn.Resize(ctx, session, cols, rows); err != nil {
		c.t.Fatalf("resize %s: %v", session, err)
	}
}

// output is everything received for session.
func (c *termConn) output(session string) string {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	if b := c.rec.out[session]; b != nil {
		return b.String()
	}
	return ""
}

// mark makes later expects look only at output received from now on.
func (c *termConn) mark(session string) { c.pos[session] = len(c.output(session)) }

// expect waits until session's output after the last match contains want
// and consumes it.
func (c *termConn) expect(session, want string) {
	c.t.Helper()
	c.waitFor(func() bool {
		out := c.output(session)
		if i := strings.Index(out[c.pos[session]:], want); i >= 0 {
			c.pos[session] += i + len(want)
			return true
		}
		return false
	}, func() string {
		return "no " + quote(want) + " from " + session + "; after the last match:\n" + c.output(session)[c.pos[session]:]
	})
}

// awaitMsg waits for the next message of type typ, skipping others.
func (c *termConn) awaitMsg(typ wire.Type) wire.Envelope {
	c.t.Helper()
	var found wire.Envelope
	c.waitFor(func() bool {
		c.rec.mu.Lock()
		defer c.rec.mu.Unlock()
		for ; c.msgI < len(c.rec.msgs); c.msgI++ {
			if c.rec.msgs[c.msgI].Type == typ {
				found = c.rec.msgs[c.msgI]
				c.msgI++
				return true
			}
		}
		return false
	}, func() string { return "no " + string(typ) + " message" })
	return found
}

// waitFor polls ok after every change until termTimeout; it fails the
// test with why() then.
func (c *termConn) waitFor(ok func() bool, why func() string) {
	c.t.Helper()
	deadline := time.NewTimer(termTimeout)
	defer deadline.Stop()
	for !ok() {
		select {
		case <-c.rec.changed:
		case <-c.conn.Done():
			if !ok() {
				c.t.Fatalf("terminal connection ended (%v): %s", c.conn.Err(), why())
			}
			return
		case <-deadline.C:
			c.t.Fatalf("within %v: %s", termTimeout, why())
		}
	}
}

func quote(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", `\r`), "\n", `\n`) }

// streamTerminal runs cmd (sh -c) in a new terminal session of s's thread,
// with a terminal connection of its own that only counts bytes, and
// returns how many output bytes arrived before the session's exit and how
// long that took from the open. For the benchmarks: e.g.
// streamTerminal(t, e, s, "head -c 256M /dev/zero") should give 256 MiB.
func streamTerminal(t *testing.T, e *env, s *session, cmd string) (bytes int64, took time.Duration) {
	t.Helper()
	st := streamTerminalStats(t, e, s, cmd)
	return st.bytes, st.took
}

// streamStats is what streamTerminalStats measured of one stream.
type streamStats struct {
	bytes  int64         // output bytes that arrived before the exit
	frames int64         // in how many output frames
	took   time.Duration // from the open to the exit
}

// streamTerminalStats is streamTerminal, also counting the frames.
func streamTerminalStats(t *testing.T, e *env, s *session, cmd string) streamStats {
	t.Helper()
	c := e.dialTerm(s.conn.Thread(), true)
	defer c.conn.Close()
	start := time.Now()
	a := c.open([]string{"sh", "-c", cmd}, 80, 24)
	ex := c.awaitMsg(wire.TypeTerminalExit)
	took := time.Since(start)
	var x wire.TerminalExit
	if err := ex.Decode(&x); err != nil || x.Session != a.Session {
		t.Fatalf("terminal_exit %s: %v", ex.Data, err)
	}
	if x.ExitCode != 0 {
		t.Fatalf("%q exited with status %d", cmd, x.ExitCode)
	}
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	return streamStats{bytes: c.rec.n[a.Session], frames: c.rec.frames[a.Session], took: took}
}
