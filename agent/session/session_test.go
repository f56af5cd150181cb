package session_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHello(t *testing.T) {
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}, Software: "boxwire-agent/test"})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{Version: wire.Version, Role: wire.RoleClient}))
	got := c.next()
	h := decode[wire.Hello](t, got)
	if got.Type != wire.TypeHello || got.Thread != session.DefaultThread || got.ID != "h1" || got.Seq != 0 {
		t.Fatalf("hello envelope %+v", got)
	}
	if h.Version != wire.Version || h.Role != wire.RoleAgent || h.Software != "boxwire-agent/test" || h.Thread != session.DefaultThread {
		t.Fatalf("hello %+v", h)
	}
}

func TestHandshakeFailuresClose(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		code  wire.Code
	}{
		{"version mismatch", []byte(`{"type":"hello","data":{"version":2,"role":"client"}}`), wire.CodeVersionMismatch},
		{"not hello first", []byte(`{"type":"ping","id":"p"}`), wire.CodeBadMessage},
		{"hello without data", []byte(`{"type":"hello"}`), wire.CodeBadMessage},
		{"garbage", []byte(`nope`), wire.CodeBadMessage},
	}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := e.dialRaw(nil)
			if err != nil {
				t.Fatal(err)
			}
			c.sendRaw(tc.frame)
			got := c.next()
			if got.Type != wire.TypeError || decode[wire.Error](t, got).Code != tc.code {
				t.Fatalf("got %s %s, want error %s", got.Type, got.Data, tc.code)
			}
			c.expectClosed()
		})
	}
}

func TestAuthToken(t *testing.T) {
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}, Token: "s3cret"})
	for _, h := range []http.Header{nil, {"Authorization": {"Bearer wrong"}}} {
		_, resp, err := e.dialRaw(h)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial with %v: err %v resp %v, want 401", h, err, resp)
		}
		resp.Body.Close()
	}
	c, _, err := e.dialRaw(http.Header{"Authorization": {"Bearer s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: wire.Version}))
	if got := c.next(); got.Type != wire.TypeHello {
		t.Fatalf("got %s", got.Type)
	}
}

func TestFullTurn(t *testing.T) {
	usage := wire.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}
	model := &fakeModel{steps: []step{
		{text: "looking", calls: []loop.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"a":1}`}}, usage: usage},
		{text: "done", usage: usage},
	}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{echoTool()}}})
	c := e.dial("")
	c.send(userMessage("m1", "hello"))
	_, events := c.await(wire.TypeTurnDone)

	want := []wire.Type{
		wire.TypeUserEcho,
		wire.TypeAssistantDelta, wire.TypeAssistantMessage,
		wire.TypeToolCall, wire.TypeToolOutput, wire.TypeToolResult,
		wire.TypeAssistantDelta, wire.TypeAssistantMessage,
		wire.TypeTurnDone,
	}
	var got []wire.Type
	for i, ev := range events {
		got = append(got, ev.Type)
		if ev.Seq != uint64(i+1) || ev.ID != "m1" || ev.Thread != session.DefaultThread {
			t.Fatalf("event %d %s: seq %d id %q thread %q", i, ev.Type, ev.Seq, ev.ID, ev.Thread)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if echo := decode[wire.UserMessage](t, events[0]); echo.Text != "hello" {
		t.Fatalf("user_echo %q", echo.Text)
	}
	done := decode[wire.TurnDone](t, events[len(events)-1])
	if done.Reason != wire.ReasonStop || done.Usage == nil || done.Usage.TotalTokens != 4 {
		t.Fatalf("turn_done %+v", done)
	}

	// A second turn continues the numbering.
	c.send(userMessage("m2", "again"))
	echo := c.next()
	if echo.Type != wire.TypeUserEcho || echo.Seq != uint64(len(events)+1) || echo.ID != "m2" {
		t.Fatalf("second turn starts with %+v", echo)
	}
	c.await(wire.TypeTurnDone)
}

func TestBusyAndInterrupt(t *testing.T) {
	// gate is never opened: the step waits for interrupt. The interrupt is
	// sent only once the model has taken the step; sent earlier it would end
	// the turn before the model call, leaving the gated step to m3.
	gate, taken := make(chan struct{}), make(chan struct{})
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{steps: []step{{gate: gate, taken: taken}}}}})
	c := e.dial("t1")
	c.send(userMessage("m1", "long"))
	if ev := c.next(); ev.Type != wire.TypeUserEcho {
		t.Fatalf("got %s", ev.Type)
	}
	c.send(userMessage("m2", "too soon"))
	expectError(t, c.next(), wire.CodeBusy, "m2")

	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatal("the model never took the step")
	}
	c.send(wire.Envelope{Type: wire.TypeInterrupt, ID: "i1"})
	done, _ := c.await(wire.TypeTurnDone)
	if r := decode[wire.TurnDone](t, done).Reason; r != wire.ReasonInterrupted || done.ID != "m1" {
		t.Fatalf("turn_done %s id %q", r, done.ID)
	}

	// Interrupt without a turn does nothing; the next turn runs.
	c.send(wire.Envelope{Type: wire.TypeInterrupt})
	c.send(userMessage("m3", "now"))
	done, _ = c.await(wire.TypeTurnDone)
	if r := decode[wire.TurnDone](t, done).Reason; r != wire.ReasonStop || done.ID != "m3" {
		t.Fatalf("turn_done %s id %q", r, done.ID)
	}
}

func TestInterruptKillsRunningTool(t *testing.T) {
	started := make(chan struct{})
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "w1", Name: "wait"}}}}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{waitTool(started)}}})
	c := e.dial("")
	c.send(userMessage("m1", "wait"))
	c.await(wire.TypeToolCall)
	select { // the tool runs: the interrupt must stop it, not pre-empt it
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}
	c.send(wire.Envelope{Type: wire.TypeInterrupt})
	res, _ := c.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, res); r.CallID != "w1" || r.Error == "" {
		t.Fatalf("tool_result %+v", r)
	}
	done := c.next()
	if done.Type != wire.TypeTurnDone || decode[wire.TurnDone](t, done).Reason != wire.ReasonInterrupted {
		t.Fatalf("got %s %s", done.Type, done.Data)
	}
}

func TestRequestsAndBadFrames(t *testing.T) {
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	c := e.dial("")
	tests := []struct {
		name  string
		frame []byte
		want  wire.Type
		code  wire.Code
		id    string
	}{
		{"ping", []byte(`{"type":"ping","id":"p1"}`), wire.TypePong, "", "p1"},
		{"bad json", []byte(`{"type":`), wire.TypeError, wire.CodeBadMessage, ""},
		{"no type", []byte(`{"id":"x"}`), wire.TypeError, wire.CodeBadMessage, ""},
		{"unknown type", []byte(`{"type":"dance","id":"u1"}`), wire.TypeError, wire.CodeUnknownType, "u1"},
		{"event sent as request", []byte(`{"type":"turn_done","id":"e1"}`), wire.TypeError, wire.CodeBadMessage, "e1"},
		{"second hello", []byte(`{"type":"hello","id":"h2","data":{"version":1}}`), wire.TypeError, wire.CodeBadMessage, "h2"},
		{"user_message without text", []byte(`{"type":"user_message","id":"m0","data":{}}`), wire.TypeError, wire.CodeBadMessage, "m0"},
		{"too large", append(append([]byte(`{"type":"user_message","data":{"text":"`), bytes.Repeat([]byte("x"), wire.MaxMessageBytes)...), `"}}`...), wire.TypeError, wire.CodeTooLarge, ""},
		{"ping after all that", []byte(`{"type":"ping","id":"p2"}`), wire.TypePong, "", "p2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(tc.frame)
			got := c.next()
			if tc.want == wire.TypeError {
				expectError(t, got, tc.code, tc.id)
				return
			}
			if got.Type != tc.want || got.ID != tc.id || got.Seq != 0 {
				t.Fatalf("got %+v, want %s id %q", got, tc.want, tc.id)
			}
		})
	}
}

func TestThreadFanOutSurvivesDroppedConnection(t *testing.T) {
	gate, taken := make(chan struct{}), make(chan struct{})
	model := &fakeModel{steps: []step{{text: "shared", gate: gate, taken: taken}}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model}})
	a, b := e.dial("t1"), e.dial("t1")
	other := e.dial("t2")

	a.send(userMessage("m1", "hi"))
	echoA, echoB := a.next(), b.next()
	if echoA.Type != wire.TypeUserEcho || echoB.Seq != echoA.Seq || echoB.ID != "m1" {
		t.Fatalf("a saw %+v, b saw %+v", echoA, echoB)
	}
	b.send(userMessage("m2", "me too"))
	expectError(t, b.next(), wire.CodeBusy, "m2")
	select { // t1's turn holds the gated step before t2 asks the model
	case <-taken:
	case <-time.After(waitFor):
		t.Fatal("t1's turn never called the model")
	}

	// The thread's turn does not block other threads.
	other.send(userMessage("o1", "elsewhere"))
	if done, _ := other.await(wire.TypeTurnDone); done.Seq != 4 || done.Thread != "t2" {
		t.Fatalf("t2 turn_done %+v", done)
	}

	// The starting connection goes away; the turn goes on for b.
	a.ws.Close()
	close(gate)
	done, seen := b.await(wire.TypeTurnDone)
	if r := decode[wire.TurnDone](t, done).Reason; r != wire.ReasonStop {
		t.Fatalf("reason %s", r)
	}
	if seen[0].Seq != echoA.Seq+1 {
		t.Fatalf("b's events do not follow on: %d after %d", seen[0].Seq, echoA.Seq)
	}
}

func TestSlowConnectionIsDropped(t *testing.T) {
	const chunks, batch, chunkSize = 3000, 100, 4096
	var fastSeen atomic.Int64 // tool_output events the fast reader has read
	// flood writes batches of output, each once the fast reader has caught
	// up: a producer a healthy reader can follow, and a reader that never
	// reads cannot.
	flood := fakeTool{name: "flood", run: func(_ context.Context, c tools.Call) tools.Result {
		chunk := []byte(strings.Repeat("y", chunkSize))
		for i := 0; i < chunks; i++ {
			deadline := time.Now().Add(waitFor) // for this batch: the machine may be slow
			for i%batch == 0 && fastSeen.Load() < int64(i) {
				if time.Now().After(deadline) {
					return tools.Result{Err: "fast reader fell behind"}
				}
				time.Sleep(time.Millisecond)
			}
			c.Output(chunk)
		}
		return tools.Result{Output: "flooded"}
	}}
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "f", Name: "flood"}}}}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{flood}}})
	slow := e.dial("t")
	fast := e.dial("t")
	done := make(chan []wire.Envelope, 1)
	go func() { // the fast reader drains while the tool floods
		var last []wire.Envelope
		for {
			env, err := fast.read()
			if err != nil {
				done <- last
				return
			}
			if env.Type == wire.TypeToolOutput {
				fastSeen.Add(1)
				continue
			}
			last = append(last, env)
			if env.Type == wire.TypeTurnDone {
				done <- last
				return
			}
		}
	}()
	fast.send(userMessage("m", "flood"))
	events := <-done
	if n := fastSeen.Load(); n != chunks || len(events) == 0 || events[len(events)-1].Type != wire.TypeTurnDone {
		t.Fatalf("fast connection saw %d chunks (want %d) and then %d other events", n, chunks, len(events))
	}
	if res := decode[wire.ToolResult](t, events[len(events)-2]); res.Error != "" {
		t.Fatalf("tool_result %+v", res)
	}
	// The slow one was cut off rather than waited for: reading it now ends
	// in an error before turn_done arrives.
	for {
		env, err := slow.read()
		if err != nil {
			break
		}
		if env.Type == wire.TypeTurnDone {
			t.Fatal("slow connection got every event; it should have been dropped")
		}
	}
}

// The bridge keeps the thread's log: it is never dropped for being slow.
// A flood waits for it instead.
func TestSlowBridgeIsWaitedFor(t *testing.T) {
	const chunks = 3000 // well over the send queue
	flood := fakeTool{name: "flood", run: func(_ context.Context, c tools.Call) tools.Result {
		chunk := []byte(strings.Repeat("z", 4096))
		for range chunks {
			c.Output(chunk)
		}
		return tools.Result{Output: "flooded"}
	}}
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "f", Name: "flood"}}}}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{flood}}})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Thread: "t"}))
	if got := c.next(); got.Type != wire.TypeHello {
		t.Fatalf("handshake answered %s", got.Type)
	}
	c.resume(wire.Resume{}) // tool checks wait for it, as they follow the replay
	c.send(userMessage("m", "flood"))
	check, _ := c.await(wire.TypeToolCheck) // the agent asks its bridge first
	c.send(wire.MustNew(wire.TypeToolVerdict, "", check.ID, wire.ToolVerdict{Allowed: true}))
	time.Sleep(500 * time.Millisecond) // the queue fills while nobody reads
	n := 0
	for {
		env := c.next()
		if env.Type == wire.TypeToolOutput {
			n++
		}
		if env.Type == wire.TypeTurnDone {
			break
		}
	}
	if n != chunks {
		t.Fatalf("the bridge got %d of %d chunks", n, chunks)
	}
}
