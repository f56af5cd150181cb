package terminal_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/bridge/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// sink records what a session sends; with full set it refuses frames, and
// its Watchers are woken when full is cleared.
type sink struct {
	wire.Watchers
	mu     sync.Mutex
	out    bytes.Buffer
	msgs   []wire.Envelope
	full   bool
	frames int
}

func (k *sink) Send(env wire.Envelope) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.msgs = append(k.msgs, env)
}

func (k *sink) Offer(frame []byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.full {
		return false
	}
	f, err := wire.ParseFrame(frame)
	if err != nil || f.Kind != wire.FrameOutput {
		panic("bad frame")
	}
	k.out.Write(f.Data)
	k.frames++
	return true
}

func (k *sink) setFull(v bool) {
	k.mu.Lock()
	k.full = v
	k.mu.Unlock()
	if !v {
		k.Wake()
	}
}

func (k *sink) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

// await waits until cond holds for k's state.
func (k *sink) await(t *testing.T, what string, cond func(out string, msgs []wire.Envelope) bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		k.mu.Lock()
		ok := cond(k.out.String(), k.msgs)
		out, n := k.out.String(), len(k.msgs)
		k.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if len(out) > 200 {
				out = "..." + out[len(out)-200:]
			}
			t.Fatalf("never saw %s; output (%d bytes) %q, %d messages", what, len(out), out, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *sink) message(t *testing.T, typ wire.Type) wire.Envelope {
	t.Helper()
	var found wire.Envelope
	k.await(t, string(typ), func(_ string, msgs []wire.Envelope) bool {
		for _, m := range msgs {
			if m.Type == typ {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

func decode[T any](t *testing.T, env wire.Envelope) T {
	t.Helper()
	var v T
	if err := env.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func newRegistry(t *testing.T, cfg terminal.Config) *terminal.Registry {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	r := terminal.New(cfg)
	t.Cleanup(r.Close)
	return r
}

func open(t *testing.T, r *terminal.Registry, o wire.TerminalOpen) *terminal.Session {
	t.Helper()
	s, err := r.Open(o, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenAttachExit(t *testing.T) {
	r := newRegistry(t, terminal.Config{})
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "read x; echo got=$x; exit 3"}, Cols: 100, Rows: 30})
	k := &sink{}
	s.Attach(k, "a1")
	att := k.message(t, wire.TypeTerminalAttached)
	if a := decode[wire.TerminalAttached](t, att); att.ID != "a1" || a.Session != s.ID() || a.Cols != 100 || a.Rows != 30 || a.Watchers != 1 {
		t.Fatalf("attached %s %+v", att.ID, a)
	}
	if err := s.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	k.await(t, "output", func(out string, _ []wire.Envelope) bool { return strings.Contains(out, "got=hi\r\n") })
	if e := decode[wire.TerminalExit](t, k.message(t, wire.TypeTerminalExit)); e.ExitCode != 3 || e.Session != s.ID() {
		t.Fatalf("exit %+v", e)
	}
	list := r.List()
	if len(list) != 1 || !list[0].Exited || *list[0].ExitCode != 3 {
		t.Fatalf("list %+v", list)
	}
	if err := r.CloseSession(s.ID()); err != nil {
		t.Fatal(err)
	}
	if len(r.List()) != 0 {
		t.Fatal("closed session still listed")
	}
}

func TestReattachRendersScreen(t *testing.T) {
	r := newRegistry(t, terminal.Config{})
	// A full-screen redraw, a terminal query (which must not come back on
	// attach) and a cursor placement.
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", `printf '\033[?1049h\033[2J\033[3;5Hhello\033[6n\033[5;1Hbottom'; echo ready >&2; sleep 100`}, Cols: 40, Rows: 10})
	first := &sink{}
	s.Attach(first, "a1")
	// The program may have drawn before the attach (then its screen
	// carries it) or after (then live output does).
	first.await(t, "output", func(out string, msgs []wire.Envelope) bool {
		for _, m := range msgs {
			var a wire.TerminalAttached
			if m.Type == wire.TypeTerminalAttached && m.Decode(&a) == nil && strings.Contains(a.Screen, "bottom") {
				return true
			}
		}
		return strings.Contains(out, "bottom")
	})
	second := &sink{}
	s.Attach(second, "a2")
	a := decode[wire.TerminalAttached](t, second.message(t, wire.TypeTerminalAttached))
	for _, want := range []string{"\x1b[?1049h", "\x1b[3;1H    hello", "\x1b[5;1Hbottom"} {
		if !strings.Contains(a.Screen, want) {
			t.Errorf("screen %q lacks %q", a.Screen, want)
		}
	}
	if strings.Contains(a.Screen, "\x1b[6n") {
		t.Errorf("screen replays a terminal query: %q", a.Screen)
	}
	if a.Watchers != 2 {
		t.Errorf("watchers = %d", a.Watchers)
	}
	// Live output reaches both; a detached one gets nothing more.
	if !s.Detach(first) {
		t.Fatal("detach: not watching")
	}
	if err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	before := first.output()
	if err := s.Signal("KILL"); err != nil {
		t.Fatal(err)
	}
	second.message(t, wire.TypeTerminalExit)
	if first.output() != before {
		t.Error("a detached sink got output")
	}
}

func TestResize(t *testing.T) {
	r := newRegistry(t, terminal.Config{})
	// The program prints nothing before the first line of input, sent once
	// k watches: output before the attach would not reach k.
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "read x; stty size; read x; stty size"}, Cols: 80, Rows: 24})
	k := &sink{}
	s.Attach(k, "")
	if err := s.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	k.await(t, "size", func(out string, _ []wire.Envelope) bool { return strings.Contains(out, "24 80") })
	if err := s.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	k.await(t, "new size", func(out string, _ []wire.Envelope) bool { return strings.Contains(out, "43 132") })
	if info := s.Info(); info.Cols != 132 || info.Rows != 43 {
		t.Errorf("info %+v", info)
	}
	if err := s.Resize(0, 10); err == nil {
		t.Error("resize to 0 columns worked")
	}
	if err := s.Signal("NOPE"); err == nil {
		t.Error("unknown signal worked")
	}
}

func TestBulkOutputComplete(t *testing.T) {
	r := newRegistry(t, terminal.Config{})
	const n = 2 << 20
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "stty -echo; read x; head -c 2097152 /dev/zero | tr '\\0' x"}})
	k := &sink{}
	s.Attach(k, "")
	if err := s.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	k.message(t, wire.TypeTerminalExit)
	if got := strings.Count(k.output(), "x"); got != n {
		t.Fatalf("got %d bytes of output, want %d", got, n)
	}
}

func TestSlowWatcherDetached(t *testing.T) {
	r := newRegistry(t, terminal.Config{StallLimit: 200 * time.Millisecond, LagGrace: 100 * time.Millisecond})
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "stty -echo; read x; seq 1 20000; read y"}})
	fast, slow := &sink{}, &sink{}
	s.Attach(fast, "")
	s.Attach(slow, "")
	slow.setFull(true)
	if err := s.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	d := decode[wire.TerminalDetached](t, slow.message(t, wire.TypeTerminalDetached))
	if d.Reason != wire.DetachTooSlow {
		t.Fatalf("detached %+v", d)
	}
	fast.await(t, "all output", func(out string, _ []wire.Envelope) bool { return strings.Contains(out, "\r\n20000\r\n") })

	// A lone watcher that takes nothing holds the program for StallLimit at
	// most, then is detached too.
	fast.setFull(true)
	if err := s.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	// s2 prints only once stuck watches: output before the attach would
	// go to nobody, and s2 could end without stuck being detached.
	s2 := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "read x; seq 1 50000"}})
	stuck := &sink{full: true}
	s2.Attach(stuck, "")
	if err := s2.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stuck.message(t, wire.TypeTerminalDetached)
	stuck.message(t, wire.TypeTerminalAttached)
}

func TestEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	r := newRegistry(t, terminal.Config{Env: []string{"FROM_CONFIG=1"}})
	// The program waits for a line of input, sent once k watches.
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", `read x; echo "[$TERM][$FROM_CONFIG][$MINE][${OPENAI_API_KEY-unset}][$PWD]"; sleep 100`}, Env: map[string]string{"MINE": "2"}, Dir: "/"})
	k := &sink{}
	s.Attach(k, "")
	if err := s.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	k.await(t, "env", func(out string, _ []wire.Envelope) bool {
		return strings.Contains(out, "[xterm-256color][1][2][unset][/]")
	})
}

func TestRegistryErrors(t *testing.T) {
	r := newRegistry(t, terminal.Config{})
	if _, err := r.Get("term_9"); err == nil {
		t.Error("unknown session found")
	}
	if _, err := r.Open(wire.TerminalOpen{Command: []string{"/no/such/program"}}, nil, ""); err == nil {
		t.Error("opened a missing program")
	}
	r.Close()
	if _, err := r.Open(wire.TerminalOpen{Command: []string{"true"}}, nil, ""); err == nil {
		t.Error("opened after Close")
	}
}

func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	// A session is idle, and may be reaped, from Open until the Attach: the
	// check below means something only if the test got to attach in less
	// than idle (on a loaded machine it may not; then it tries again).
	var r *terminal.Registry
	var s *terminal.Session
	k := &sink{}
	for try := 0; s == nil; try++ {
		began := time.Now()
		r = newRegistry(t, terminal.Config{IdleTimeout: idle})
		s = open(t, r, wire.TerminalOpen{Command: []string{"sleep", "100"}})
		s.Attach(k, "")
		if time.Since(began) >= idle {
			if try == 10 {
				t.Fatalf("could not attach within %v of an open", idle)
			}
			r.Close()
			s, k = nil, &sink{}
		}
	}
	time.Sleep(2 * idle)
	if len(r.List()) != 1 {
		t.Fatal("a watched session was reaped")
	}
	s.Detach(k)
	deadline := time.Now().Add(waitFor)
	for len(r.List()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle session never reaped")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
