package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// step is one scripted model answer.
type step struct {
	deltas []string
	calls  []loop.ToolCall
	usage  wire.Usage
	err    error
	// block makes the step wait for ctx to end after sending its deltas;
	// blocked, if set, is closed then.
	block   bool
	blocked chan struct{}
}

// fakeModel answers requests from a script and records them.
type fakeModel struct {
	mu    sync.Mutex
	steps []step
	reqs  []loop.Request
	// fallback answers when the script is exhausted.
	fallback *step
}

func (m *fakeModel) Stream(ctx context.Context, req loop.Request, onDelta func(string)) (loop.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	var st step
	switch {
	case len(m.steps) > 0:
		st, m.steps = m.steps[0], m.steps[1:]
	case m.fallback != nil:
		st = *m.fallback
	default:
		m.mu.Unlock()
		return loop.Response{}, errors.New("fake model: script exhausted")
	}
	m.mu.Unlock()
	var resp loop.Response
	for _, d := range st.deltas {
		onDelta(d)
		resp.Text += d
	}
	if st.block {
		if st.blocked != nil {
			close(st.blocked)
		}
		<-ctx.Done()
		return resp, ctx.Err()
	}
	if st.err != nil {
		return resp, st.err
	}
	resp.ToolCalls = st.calls
	resp.Usage = st.usage
	return resp, nil
}

func (m *fakeModel) requests() []loop.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]loop.Request(nil), m.reqs...)
}

// fakeTool runs a function.
type fakeTool struct {
	name string
	run  func(ctx context.Context, call tools.Call) tools.Result
}

func (t fakeTool) Name() string                { return t.name }
func (t fakeTool) Description() string         { return "fake " + t.name }
func (t fakeTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t fakeTool) Run(ctx context.Context, call tools.Call) tools.Result {
	return t.run(ctx, call)
}

// echoTool outputs its arguments in two chunks and returns them.
func echoTool() fakeTool {
	return fakeTool{name: "echo", run: func(_ context.Context, call tools.Call) tools.Result {
		if call.Output != nil {
			call.Output([]byte("out:"))
			call.Output(call.Args)
		}
		code := 0
		return tools.Result{Output: string(call.Args), ExitCode: &code}
	}}
}

// blockingTool signals started and waits for ctx to end (as a killed
// command would).
func blockingTool(started chan<- struct{}) fakeTool {
	return fakeTool{name: "sleep", run: func(ctx context.Context, _ tools.Call) tools.Result {
		close(started)
		<-ctx.Done()
		code := -1
		return tools.Result{Output: "killed", ExitCode: &code}
	}}
}

// recorder collects emitted events.
type recorder struct {
	mu     sync.Mutex
	events []wire.Envelope
}

func (r *recorder) emit(env wire.Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, env)
}

func (r *recorder) types() []wire.Type {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]wire.Type, len(r.events))
	for i, e := range r.events {
		out[i] = e.Type
	}
	return out
}

func (r *recorder) all() []wire.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Envelope(nil), r.events...)
}

func (r *recorder) first(t *testing.T, typ wire.Type) wire.Envelope {
	t.Helper()
	for _, e := range r.all() {
		if e.Type == typ {
			return e
		}
	}
	t.Fatalf("no %s event in %v", typ, r.types())
	return wire.Envelope{}
}

func decode[T any](t *testing.T, env wire.Envelope) T {
	t.Helper()
	var v T
	if err := env.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", env.Type, err)
	}
	return v
}

// runTurn runs a turn with a deadline and fails the test if it hangs.
func runTurn(t *testing.T, ctx context.Context, l *loop.Loop, conv *loop.Conversation, text string, rec *recorder) wire.TurnDone {
	t.Helper()
	done := make(chan wire.TurnDone, 1)
	go func() { done <- l.Turn(ctx, conv, text, rec.emit) }()
	select {
	case td := <-done:
		return td
	case <-time.After(10 * time.Second):
		t.Fatal("turn did not finish within 10s")
		return wire.TurnDone{}
	}
}

// checkHistory fails if an assistant tool call is not answered by a tool
// message before the next assistant or user message.
func checkHistory(t *testing.T, msgs []loop.Message) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case loop.RoleAssistant, loop.RoleUser:
			if len(open) > 0 {
				t.Fatalf("message %d (%s): tool calls %v unanswered", i, m.Role, open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case loop.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("message %d answers unknown call %q", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("history ends with unanswered tool calls %v", open)
	}
}
