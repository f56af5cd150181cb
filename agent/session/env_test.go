package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// step is one scripted model answer: text and calls with usage, or err.
// With gate set, the step waits for the gate to close (or the turn to end)
// before answering.
type step struct {
	text  string
	calls []loop.ToolCall
	usage wire.Usage
	err   error
	gate  chan struct{}
	taken chan struct{} // closed when a model call takes this step
}

// fakeModel answers from a script, then with "ok".
type fakeModel struct {
	mu    sync.Mutex
	sizes []int // len(req.Messages) of each request
	steps []step
}

// requests returns the Message counts of the requests the model got.
func (m *fakeModel) requests() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.sizes...)
}

func (m *fakeModel) Stream(ctx context.Context, req loop.Request, onDelta func(string)) (loop.Response, error) {
	m.mu.Lock()
	m.sizes = append(m.sizes, len(req.Messages))
	st := step{text: "ok"}
	if len(m.steps) > 0 {
		st, m.steps = m.steps[0], m.steps[1:]
	}
	m.mu.Unlock()
	if st.taken != nil {
		close(st.taken)
	}
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-ctx.Done():
			return loop.Response{}, ctx.Err()
		}
	}
	if st.err != nil {
		return loop.Response{}, st.err
	}
	if st.text != "" {
		onDelta(st.text)
	}
	return loop.Response{Text: st.text, ToolCalls: st.calls, Usage: st.usage}, nil
}

// fakeTool runs a function.
type fakeTool struct {
	name string
	run  func(ctx context.Context, call tools.Call) tools.Result
}

func (t fakeTool) Name() string                { return t.name }
func (t fakeTool) Description() string         { return "fake" }
func (t fakeTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t fakeTool) Run(ctx context.Context, c tools.Call) tools.Result {
	return t.run(ctx, c)
}

func echoTool() fakeTool {
	return fakeTool{name: "echo", run: func(_ context.Context, c tools.Call) tools.Result {
		c.Output([]byte("chunk"))
		return tools.Result{Output: string(c.Args)}
	}}
}

// waitTool blocks until its turn is cancelled, after signalling started.
func waitTool(started chan<- struct{}) fakeTool {
	return fakeTool{name: "wait", run: func(ctx context.Context, _ tools.Call) tools.Result {
		close(started)
		<-ctx.Done()
		return tools.Result{Output: "killed"}
	}}
}

// env is one agent server on a unix socket.
type env struct {
	t    *testing.T
	sock string
}

func newEnv(t *testing.T, cfg session.Config) *env {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := session.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := session.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("Run did not return after cancel")
		}
	})
	return &env{t: t, sock: sock}
}

// client is one test WebSocket connection.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

// dialRaw connects without a hello.
func (e *env) dialRaw(header http.Header) (*client, *http.Response, error) {
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", e.sock)
		},
		HandshakeTimeout: waitFor,
	}
	ws, resp, err := d.Dial("ws://agent"+wire.Path, header)
	if err != nil {
		return nil, resp, err
	}
	c := &client{t: e.t, ws: ws}
	e.t.Cleanup(func() { ws.Close() })
	return c, resp, nil
}

// dial connects to thread and completes the handshake.
func (e *env) dial(thread string) *client {
	e.t.Helper()
	c, _, err := e.dialRaw(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: thread}))
	if got := c.next(); got.Type != wire.TypeHello {
		e.t.Fatalf("handshake answered %s %s", got.Type, got.Data)
	}
	return c
}

func (c *client) send(env wire.Envelope) {
	c.t.Helper()
	if err := c.ws.WriteJSON(env); err != nil {
		c.t.Fatalf("send %s: %v", env.Type, err)
	}
}

func (c *client) sendRaw(data []byte) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatalf("send raw: %v", err)
	}
}

func (c *client) read() (wire.Envelope, error) {
	if err := c.ws.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
		return wire.Envelope{}, err
	}
	var env wire.Envelope
	err := c.ws.ReadJSON(&env)
	return env, err
}

// next returns the next message or fails within waitFor.
func (c *client) next() wire.Envelope {
	c.t.Helper()
	env, err := c.read()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return env
}

// await reads until a message of type typ, returning it and everything
// read on the way (including it).
func (c *client) await(typ wire.Type) (wire.Envelope, []wire.Envelope) {
	c.t.Helper()
	var seen []wire.Envelope
	for {
		env := c.next()
		seen = append(seen, env)
		if env.Type == typ {
			return env, seen
		}
	}
}

// expectClosed fails unless the server closes the connection next.
func (c *client) expectClosed() {
	c.t.Helper()
	for {
		env, err := c.read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("connection was not closed")
			}
			return
		}
		c.t.Logf("before close: %s", env.Type)
	}
}

func decode[T any](t *testing.T, env wire.Envelope) T {
	t.Helper()
	var v T
	if err := env.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", env.Type, err)
	}
	return v
}

func userMessage(id, text string) wire.Envelope {
	return wire.MustNew(wire.TypeUserMessage, "", id, wire.UserMessage{Text: text})
}

func expectError(t *testing.T, env wire.Envelope, code wire.Code, id string) {
	t.Helper()
	if env.Type != wire.TypeError {
		t.Fatalf("got %s %s, want error %s", env.Type, env.Data, code)
	}
	if e := decode[wire.Error](t, env); e.Code != code || env.ID != id || env.Seq != 0 {
		t.Fatalf("error %+v id %q seq %d, want %s id %q without seq", e, env.ID, env.Seq, code, id)
	}
}
