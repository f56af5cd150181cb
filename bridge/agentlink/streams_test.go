package agentlink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/bridge/agentlink"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

const waitFor = 20 * time.Second

// The link's streams are tested against the real agent (agent/session):
// what the bridge sends is what the agent takes, byte for byte.

type fakeThread struct {
	mu        sync.Mutex
	delivered []wire.Envelope
}

func (f *fakeThread) Publish(wire.Envelope)                      {}
func (f *fakeThread) PublishCovered(wire.Envelope, store.Cursor) {}
func (f *fakeThread) Deliver(env wire.Envelope, _ string, _ bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered = append(f.delivered, env)
}
func (f *fakeThread) TerminalOutput([]byte)                            {}
func (f *fakeThread) AgentResumed(wire.Resumed)                        {}
func (f *fakeThread) SandboxExited(sandbox.Sandbox) wire.SandboxExited { return wire.SandboxExited{} }
func (f *fakeThread) HeldSnapshot() json.RawMessage                    { return nil }
func (f *fakeThread) RestoreHeld(json.RawMessage)                      {}
func (f *fakeThread) deliveries() []wire.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Envelope(nil), f.delivered...)
}
func (fakeFleet) Linked(*fleet.Box, string, string)                   {}
func (fakeStore) SaveCursor(string, store.Cursor)                     {}
func (fakeStore) SaveInflight(string, []wire.Envelope)                {}
func (fakeStore) Flush()                                              {}
func (fakeStore) Inflight(string) ([]wire.Envelope, error)            { return nil, nil }
func (fakeStore) Cursor(string) (store.Cursor, bool, error)           { return store.Cursor{}, false, nil }
func (fakeStore) Events(string, uint64, int) ([]wire.Envelope, error) { return nil, nil }
func (fakeFleet) Greet(context.Context, *fleet.Box, string) (*websocket.Conn, error) {
	return nil, errors.New("gone")
}

type fakeFleet struct{}

func (fakeFleet) LossCause(context.Context, *fleet.Box, string) (wire.SandboxExited, bool) {
	return wire.SandboxExited{Reason: wire.ExitDied, Message: "test"}, true
}
func (fakeFleet) Replace(context.Context, *fleet.Box, string, wire.SandboxExited) (string, *websocket.Conn, error) {
	return "", nil, errors.New("no replacement in this test")
}

type fakeStore struct{}

// linkEnv is a link to a real agent on a unix socket.
type linkEnv struct {
	link   *agentlink.Link
	thread *fakeThread
	agent  *session.Server
	// newBytes is what agentlink.New allocated (the idle agent may add a
	// little of its own).
	newBytes uint64
}

// TestLinkWithoutStreamsIsSmall: a link allocates its streams' queue
// (256 KiB) only when a stream is opened; most threads never open one,
// and one bridge holds thousands of idle links.
func TestLinkWithoutStreamsIsSmall(t *testing.T) {
	e := newLinkEnv(t)
	if e.newBytes > 64<<10 {
		t.Fatalf("a new link allocated %d KiB, want under 64 KiB", e.newBytes>>10)
	}
}

func newLinkEnv(t *testing.T) *linkEnv { return newLinkEnvWith(t, forward.Config{}) }

// newLinkEnvWith is newLinkEnv with the agent's streams configured by fwd.
func newLinkEnvWith(t *testing.T, fwd forward.Config) *linkEnv {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := session.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	agent := session.New(session.Config{Loop: loop.Config{Model: nil}, Forward: fwd})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- agent.Run(ctx, ln) }()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", sock)
	}}
	ws, _, err := d.Dial("ws://agent"+wire.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Thread: "t1"})); err != nil {
		t.Fatal(err)
	}
	var hello wire.Envelope
	if err := ws.ReadJSON(&hello); err != nil || hello.Type != wire.TypeHello {
		t.Fatalf("hello: %v %s", err, hello.Type)
	}
	e := &linkEnv{thread: &fakeThread{}, agent: agent}
	var group sync.WaitGroup
	tctx, tcancel := context.WithCancel(context.Background())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e.link = agentlink.New(tctx, ws, agentlink.Config{
		ID: "t1", Thread: e.thread, Fleet: fakeFleet{}, Store: fakeStore{}, Server: tctx,
		Group: &group, LogEmpty: true, MaxStreams: 4,
	})
	runtime.ReadMemStats(&after)
	e.newBytes = after.TotalAlloc - before.TotalAlloc
	e.link.Start()
	t.Cleanup(func() {
		e.link.Stop()
		tcancel()
		group.Wait()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	})
	return e
}

func listenTCP(t *testing.T, serve func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().(*net.TCPAddr).Port
}

func dial(t *testing.T, e *linkEnv, port int) *agentlink.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	st, err := e.link.Streams().Dial(ctx, port)
	if err != nil {
		t.Fatalf("Dial %d: %v", port, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestStreamRoundTrip: 4 MiB each way through the link and the agent, in
// both directions at once, then a half-close each way; with an agent that
// agrees to the bridge's stream limits, and with one from before them
// (which refuses a frame over wire.DefaultStreamLimits: the bridge must
// keep to those).
func TestStreamRoundTrip(t *testing.T) {
	t.Run("limits agreed", func(t *testing.T) { streamRoundTrip(t, newLinkEnv(t)) })
	t.Run("an agent without limits", func(t *testing.T) { streamRoundTrip(t, newLinkEnvWith(t, forward.Config{NoStreamLimits: true})) })
}

func streamRoundTrip(t *testing.T, e *linkEnv) {
	port := listenTCP(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
	})
	st := dial(t, e, port)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(payload)
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	_ = st.SetReadDeadline(time.Now().Add(waitFor))
	got, err := io.ReadAll(st)
	if err != nil {
		t.Fatalf("read: %v after %d bytes", err, len(got))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, sent %d (equal: false)", len(got), len(payload))
	}
}

// TestStreamErrors: nothing listening is port_closed; the thread's
// stream limit is stream_limit; a slow stream stalls only itself; a
// deadline is a timeout; a client's stream request is refused.
func TestStreamErrors(t *testing.T) {
	e := newLinkEnv(t)
	free := listenTCP(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var we wire.Error
	if _, err := e.link.Streams().Dial(ctx, 1); !errors.As(err, &we) || we.Code != wire.CodePortClosed || !strings.Contains(we.Message, "nothing listens on port 1") {
		t.Fatalf("port 1: %v", err)
	}
	if _, err := e.link.Streams().Dial(ctx, 0); !errors.As(err, &we) || we.Code != wire.CodeBadMessage {
		t.Fatalf("port 0: %v", err)
	}
	flood := listenTCP(t, func(c net.Conn) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	dial(t, e, flood) // nobody reads it: it stalls
	quiet := dial(t, e, free)
	_ = quiet.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := quiet.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if ne, ok := error(os.ErrDeadlineExceeded).(net.Error); !ok || !ne.Timeout() {
		t.Fatal("a deadline error is not a net.Error timeout")
	}
	for range 2 { // the limit is 4: the two above and these
		dial(t, e, free)
	}
	if _, err := e.link.Streams().Dial(ctx, free); !errors.As(err, &we) || we.Code != wire.CodeStreamLimit {
		t.Fatalf("fifth stream: %v", err)
	}
	ports, err := e.link.Streams().Ports(ctx) // the connection answers while slow is full
	if err != nil {
		t.Fatalf("ports while a stream is stalled: %v (%v)", err, ports)
	}
	if err := e.link.Send(wire.MustNew(wire.TypePortOpen, "t1", "c1/x", wire.PortOpen{Stream: "mine", Port: free}), waitFor); err != nil {
		t.Fatalf("send a client's port_open: %v", err)
	}
	deadline := time.Now().Add(waitFor)
	for {
		ds := e.thread.deliveries()
		if len(ds) > 0 {
			if ds[0].Type != wire.TypeError || ds[0].ID != "x" || !strings.Contains(string(ds[0].Data), "not_allowed") {
				t.Fatalf("a client's port_open answered %s %s", ds[0].Type, ds[0].Data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a client's port_open was not answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamEndsWithAgent: when the agent goes away mid-stream, the
// stream's reader and writer get ErrAgentGone at once.
func TestStreamEndsWithAgent(t *testing.T) {
	e := newLinkEnv(t)
	port := listenTCP(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	st := dial(t, e, port)
	_ = st.SetReadDeadline(time.Now().Add(waitFor))
	go e.agent.Close()
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, agentlink.ErrAgentGone) {
		t.Fatalf("read after the agent went: %v", err)
	}
	if _, err := st.Write([]byte("x")); !errors.Is(err, agentlink.ErrAgentGone) {
		t.Fatalf("write after the agent went: %v", err)
	}
}

// TestStreamAgentLimits: the limits a sandbox's agent offers in
// port_opened are its word, not trusted: an offer that breaks the rules
// refuses the stream (the agent is told bad_message), and a larger one
// than the bridge handles is clamped to the bridge's frame size.
func TestStreamAgentLimits(t *testing.T) {
	ws, agent := agentPair(t)
	link := startLink(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// answer reads the link's next port_open and answers it offering
	// limits; then it reads what the link sends next.
	answer := func(limits wire.StreamLimits) (next []byte) {
		t.Helper()
		_ = agent.SetReadDeadline(time.Now().Add(waitFor))
		for {
			mt, data, err := agent.ReadMessage()
			if err != nil {
				t.Fatalf("agent read: %v", err)
			}
			env, err := wire.Parse(data)
			if mt != websocket.TextMessage || err != nil || env.Type != wire.TypePortOpen {
				continue
			}
			var open wire.PortOpen
			if err := env.Decode(&open); err != nil || open.Limits == nil || *open.Limits != wire.OfferedStreamLimits {
				t.Fatalf("port_open %s: the bridge does not offer its limits", env.Data)
			}
			if err := agent.WriteJSON(wire.MustNew(wire.TypePortOpened, "t1", env.ID, wire.StreamRef{Stream: open.Stream, Limits: &limits})); err != nil {
				t.Fatal(err)
			}
			_, next, err = agent.ReadMessage()
			if err != nil {
				t.Fatalf("agent read: %v", err)
			}
			return next
		}
	}
	type dialed struct {
		st  *agentlink.Stream
		err error
	}
	dial := func() chan dialed {
		got := make(chan dialed, 1)
		go func() {
			st, err := link.Streams().Dial(ctx, 8000)
			got <- dialed{st, err}
		}()
		return got
	}

	got := dial()
	closed := answer(wire.StreamLimits{Data: 0, Window: 0})
	d := <-got
	var we wire.Error
	if !errors.As(d.err, &we) || we.Code != wire.CodeBadMessage || !strings.Contains(we.Message, "1 ≤ data ≤ window") {
		t.Fatalf("Dial with limits that break the rules = %v, %v", d.st, d.err)
	}
	if env, err := wire.Parse(closed); err != nil || env.Type != wire.TypeStreamClose || !strings.Contains(string(env.Data), "bad_message") {
		t.Fatalf("the agent was told %s, want stream_close bad_message", closed)
	}

	got = dial()
	wrote := make(chan error, 1)
	go func() {
		d := <-got
		if d.err == nil {
			_, d.err = d.st.Write(make([]byte, 3*wire.LargeStreamData))
		}
		wrote <- d.err
	}()
	frame := answer(wire.StreamLimits{Data: 16 << 20, Window: 1 << 30})
	f, err := wire.ParseFrame(frame)
	if err != nil || f.Kind != wire.FrameStreamData || len(f.Data) != wire.LargeStreamData {
		t.Fatalf("first frame of a write to an agent offering 16 MiB frames: %d bytes, %v; want %d", len(f.Data), err, wire.LargeStreamData)
	}
	_ = agent.SetReadDeadline(time.Time{})
	go func() { // take the rest, so that the write ends
		for {
			if _, _, err := agent.ReadMessage(); err != nil {
				return
			}
		}
	}()
	if err := <-wrote; err != nil {
		t.Fatalf("a stream with a large offer: %v", err)
	}
}
