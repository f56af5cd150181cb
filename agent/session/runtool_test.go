package session_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

func runTool(id, name, args string) wire.Envelope {
	return wire.MustNew(wire.TypeRunTool, "", id, wire.RunTool{Name: name, Arguments: json.RawMessage(args)})
}

func TestRunToolOutsideTheConversation(t *testing.T) {
	model := &fakeModel{}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{echoTool()}}})
	c := e.dial("")

	c.send(runTool("r1", "echo", `{"x":1}`))
	call, out, res := c.next(), c.next(), c.next()
	if call.Type != wire.TypeToolCall || out.Type != wire.TypeToolOutput || res.Type != wire.TypeToolResult {
		t.Fatalf("events %s %s %s", call.Type, out.Type, res.Type)
	}
	for i, ev := range []wire.Envelope{call, out, res} {
		if ev.ID != "r1" || ev.Seq != uint64(i+1) {
			t.Errorf("event %d: id %q seq %d", i, ev.ID, ev.Seq)
		}
	}
	if r := decode[wire.ToolResult](t, res); r.Output != `{"x":1}` || r.Error != "" {
		t.Fatalf("result %+v", r)
	}

	// An unknown tool is a failed result, not a protocol error.
	c.send(runTool("r2", "nope", `{}`))
	_, _ = c.next(), c.next()
	// A request without a tool name is a bad message.
	c.sendRaw([]byte(`{"type":"run_tool","id":"r3","data":{}}`))
	expectError(t, c.next(), wire.CodeBadMessage, "r3")

	// Direct runs never reach the model's conversation: a turn afterwards
	// sees only its own user message.
	c.send(userMessage("m1", "hi"))
	c.await(wire.TypeTurnDone)
	if got := model.requests(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("model requests had %v messages, want one request of system + user", got)
	}
}

func TestInterruptStopsRunTool(t *testing.T) {
	started := make(chan struct{})
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}, Tools: []tools.Tool{waitTool(started)}}})
	c := e.dial("")
	c.send(runTool("r1", "wait", `{}`))
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("the tool never started")
	}
	c.send(wire.MustNew(wire.TypeInterrupt, "", "i1", nil))
	res, _ := c.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, res); r.Error == "" {
		t.Fatalf("interrupted run has no error: %+v", r)
	}
}

// A person's run_tool is not put to the policy check the model's calls get.
func TestRunToolIsNotChecked(t *testing.T) {
	refuse := func(context.Context, loop.ToolCall) (bool, string) { return false, "refused by test" }
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}, Tools: []tools.Tool{echoTool()}, Check: refuse}})
	c := e.dial("")
	c.send(runTool("r1", "echo", `{"y":2}`))
	res, _ := c.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, res); r.Error != "" || r.Output != `{"y":2}` {
		t.Fatalf("run_tool result %+v", r)
	}
}
