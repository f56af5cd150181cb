package session_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// dialBridge connects to the default thread as a bridge and resumes, as
// the bridge does first on every link.
func (e *env) dialBridge() *client {
	e.t.Helper()
	c, _, err := e.dialRaw(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Thread: session.DefaultThread}))
	if got := c.next(); got.Type != wire.TypeHello {
		e.t.Fatalf("handshake answered %s %s", got.Type, got.Data)
	}
	c.resume(wire.Resume{})
	return c
}

// countingEcho is echoTool counting its runs.
func countingEcho(runs *atomic.Int32) fakeTool {
	t := echoTool()
	inner := t.run
	t.run = func(ctx context.Context, c tools.Call) tools.Result {
		runs.Add(1)
		return inner(ctx, c)
	}
	return t
}

func checkEnv(t *testing.T, runs *atomic.Int32) *env { return checkEnvWith(t, runs, session.Config{}) }

// checkEnvWith is checkEnv on cfg.
func checkEnvWith(t *testing.T, runs *atomic.Int32, cfg session.Config) *env {
	model := &fakeModel{steps: []step{
		{calls: []loop.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"git":"push"}`}}},
		{text: "done"},
	}}
	cfg.Loop = loop.Config{Model: model, Tools: []tools.Tool{countingEcho(runs)}}
	return newEnv(t, cfg)
}

// TestToolCheckVerdicts: with a bridge attached each call is checked
// first, and the bridge's verdict decides whether it runs.
func TestToolCheckVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		verdict wire.ToolVerdict
		runs    int32
		result  string
	}{
		{"allowed", wire.ToolVerdict{Allowed: true}, 1, ""},
		{"refused", wire.ToolVerdict{Reason: "denied by c1: no pushing"}, 0, "not run: denied by c1: no pushing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			e := checkEnv(t, &runs)
			b := e.dialBridge()
			b.send(userMessage("c9/m1", "go"))
			chkEnv, _ := b.await(wire.TypeToolCheck)
			chk := decode[wire.ToolCheck](t, chkEnv)
			if chk.CallID != "c1" || chk.Name != "echo" || string(chk.Arguments) != `{"git":"push"}` || chkEnv.ID == "" || chkEnv.Seq != 0 {
				t.Fatalf("tool_check %+v id %q seq %d", chk, chkEnv.ID, chkEnv.Seq)
			}
			if n := runs.Load(); n != 0 {
				t.Fatalf("the tool ran %d times before the verdict", n)
			}
			b.send(wire.MustNew(wire.TypeToolVerdict, "", chkEnv.ID, tc.verdict))
			res, _ := b.await(wire.TypeToolResult)
			if r := decode[wire.ToolResult](t, res); r.Error != tc.result {
				t.Fatalf("tool_result error %q, want %q", r.Error, tc.result)
			}
			b.await(wire.TypeTurnDone)
			if n := runs.Load(); n != tc.runs {
				t.Fatalf("the tool ran %d times, want %d", n, tc.runs)
			}
		})
	}
}

// TestToolCheckWaitsForTheBridge: a check waiting when the bridge
// connection closes waits for the next one and is asked again there with
// the same id; that bridge's verdict decides, and the tool runs once.
func TestToolCheckWaitsForTheBridge(t *testing.T) {
	var runs atomic.Int32
	e := checkEnv(t, &runs)
	watcher := e.dial(session.DefaultThread)
	b := e.dialBridge()
	b.send(userMessage("c9/m1", "go"))
	first, _ := b.await(wire.TypeToolCheck)
	b.ws.Close()
	b2 := e.dialBridge()
	again, _ := b2.await(wire.TypeToolCheck)
	if again.ID != first.ID || string(again.Data) != string(first.Data) {
		t.Fatalf("asked again as %s %s, first %s %s", again.ID, again.Data, first.ID, first.Data)
	}
	b2.send(wire.MustNew(wire.TypeToolVerdict, "", again.ID, wire.ToolVerdict{Allowed: true}))
	b2.send(wire.MustNew(wire.TypeToolVerdict, "", again.ID, wire.ToolVerdict{Allowed: true})) // a second is dropped
	res, _ := watcher.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, res); r.Error != "" {
		t.Fatalf("tool_result error %q", r.Error)
	}
	watcher.await(wire.TypeTurnDone)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

// TestToolCheckBridgeGone: a check whose bridge connection closed and
// did not come back within CheckReconnectWait refuses the call.
func TestToolCheckBridgeGone(t *testing.T) {
	var runs atomic.Int32
	e := checkEnvWith(t, &runs, session.Config{CheckReconnectWait: 200 * time.Millisecond})
	watcher := e.dial(session.DefaultThread)
	b := e.dialBridge()
	b.send(userMessage("c9/m1", "go"))
	b.await(wire.TypeToolCheck)
	b.ws.Close()
	res, _ := watcher.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, res); !strings.HasPrefix(r.Error, "not run: ") || !strings.Contains(r.Error, "no bridge came back") {
		t.Fatalf("tool_result error %q", r.Error)
	}
	watcher.await(wire.TypeTurnDone)
	if n := runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// TestToolVerdictRouting: only a bridge may send tool_verdict; one for no
// waiting check is dropped quietly.
func TestToolVerdictRouting(t *testing.T) {
	var runs atomic.Int32
	e := checkEnv(t, &runs)
	c := e.dial(session.DefaultThread)
	c.send(wire.MustNew(wire.TypeToolVerdict, "", "v1", wire.ToolVerdict{Allowed: true}))
	expectError(t, c.next(), wire.CodeBadMessage, "v1")

	b := e.dialBridge()
	b.send(wire.MustNew(wire.TypeToolVerdict, "", "chk_999", wire.ToolVerdict{Allowed: true}))
	b.send(wire.MustNew(wire.TypePing, "", "p1", nil))
	if got := b.next(); got.Type != wire.TypePong || got.ID != "p1" {
		t.Fatalf("after a stray verdict got %s %s, want the pong", got.Type, got.Data)
	}
}

// TestStandaloneNotChecked: without a bridge nobody is asked.
func TestStandaloneNotChecked(t *testing.T) {
	var runs atomic.Int32
	e := checkEnv(t, &runs)
	c := e.dial("")
	c.send(userMessage("m1", "go"))
	_, events := c.await(wire.TypeTurnDone)
	for _, ev := range events {
		if ev.Type == wire.TypeToolCheck {
			t.Fatal("a client was sent tool_check")
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}
