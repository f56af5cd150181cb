package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// toolsModel answers from a script and records the tool names each
// request offered.
type toolsModel struct {
	mu      sync.Mutex
	steps   []step
	offered [][]string
	tools   []string // the last tool message contents
}

func (m *toolsModel) Stream(ctx context.Context, req loop.Request, onDelta func(string)) (loop.Response, error) {
	m.mu.Lock()
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	m.offered = append(m.offered, names)
	for _, msg := range req.Messages {
		if msg.Role == loop.RoleTool {
			m.tools = append(m.tools, msg.Content)
		}
	}
	st := step{text: "ok"}
	if len(m.steps) > 0 {
		st, m.steps = m.steps[0], m.steps[1:]
	}
	m.mu.Unlock()
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-ctx.Done():
			return loop.Response{}, ctx.Err()
		}
	}
	return loop.Response{Text: st.text, ToolCalls: st.calls}, nil
}

// dialHostBridge connects as a bridge that answers host tool requests.
func (e *env) dialHostBridge() *client {
	e.t.Helper()
	c, _, err := e.dialRaw(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Thread: goldenThread, HostTools: true}))
	if got := c.next(); got.Type != wire.TypeHello {
		e.t.Fatalf("handshake answered %s %s", got.Type, got.Data)
	}
	c.resume(wire.Resume{})
	return c
}

// TestHostTools: a bridge that says it has host tools is asked for them
// at each turn's start; the model is offered them beside the agent's own;
// a call goes to the bridge as host_call, its progress streams as
// tool_output and its result (with the bridge's redaction note) is the
// tool_result; an interrupt sends host_cancel. The agent's messages are
// golden files.
func TestHostTools(t *testing.T) {
	model := &toolsModel{steps: []step{
		{calls: []loop.ToolCall{{ID: "call_7", Name: "gh_search", Arguments: `{"query":"boxwire"}`}}},
		{text: "found it"},
		{calls: []loop.ToolCall{{ID: "call_8", Name: "gh_search", Arguments: `{"query":"forever"}`}}},
	}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{echoTool()}}})
	b := e.dialHostBridge()
	got := map[string]wire.Envelope{}
	list := wire.HostTools{Tools: []wire.HostTool{{Name: "gh_search", Description: "Search the code host.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}}

	b.send(userMessage("c1/m1", "search"))
	ask, _ := b.await(wire.TypeHostToolsList)
	got["host_tools_list"] = ask
	b.send(wire.MustNew(wire.TypeHostTools, goldenThread, ask.ID, list))
	chk, _ := b.await(wire.TypeToolCheck) // approval policy applies to host tools by name and arguments
	if c := decode[wire.ToolCheck](t, chk); c.Name != "gh_search" || string(c.Arguments) != `{"query":"boxwire"}` {
		t.Fatalf("tool_check %+v", c)
	}
	b.send(wire.MustNew(wire.TypeToolVerdict, "", chk.ID, wire.ToolVerdict{Allowed: true}))
	callEnv, _ := b.await(wire.TypeHostCall)
	got["host_call"] = callEnv
	if c := decode[wire.HostCall](t, callEnv); c.CallID != "call_7" || c.Name != "gh_search" || string(c.Arguments) != `{"query":"boxwire"}` {
		t.Fatalf("host_call %+v", c)
	}
	b.send(wire.MustNew(wire.TypeHostProgress, goldenThread, callEnv.ID, wire.HostProgress{Message: "searching"}))
	out, _ := b.await(wire.TypeToolOutput)
	if o := decode[wire.ToolOutput](t, out); o.Output != "searching\r\n" {
		t.Errorf("progress as tool_output: %q", o.Output)
	}
	b.send(wire.MustNew(wire.TypeHostResult, goldenThread, callEnv.ID, wire.HostResult{Output: "boxwire/boxwire token [REDACTED]", Redacted: 1}))
	resEnv, _ := b.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, resEnv); r.Name != "gh_search" || !strings.HasPrefix(r.Output, "boxwire/boxwire token [REDACTED]\n[boxwire: 1 secret(s)") || r.Error != "" {
		t.Errorf("tool_result %+v", r)
	}
	b.await(wire.TypeTurnDone)
	model.mu.Lock()
	if !slices.Contains(model.offered[0], "gh_search") || !slices.Contains(model.offered[0], "echo") {
		t.Errorf("the model was offered %v", model.offered[0])
	}
	if last := model.tools[len(model.tools)-1]; !strings.Contains(last, "were replaced by [REDACTED]") {
		t.Errorf("the model was not told of the redaction: %q", last)
	}
	model.mu.Unlock()

	// A hanging call: the interrupt sends host_cancel and the turn ends.
	b.send(userMessage("c1/m2", "search forever"))
	ask, _ = b.await(wire.TypeHostToolsList)
	b.send(wire.MustNew(wire.TypeHostTools, goldenThread, ask.ID, list))
	chk, _ = b.await(wire.TypeToolCheck)
	b.send(wire.MustNew(wire.TypeToolVerdict, "", chk.ID, wire.ToolVerdict{Allowed: true}))
	callEnv, _ = b.await(wire.TypeHostCall)
	b.send(wire.MustNew(wire.TypeInterrupt, "", "c1/i1", nil))
	cancel, _ := b.await(wire.TypeHostCancel)
	got["host_cancel"] = cancel
	if cancel.ID != callEnv.ID {
		t.Errorf("host_cancel id %q, the call's %q", cancel.ID, callEnv.ID)
	}
	resEnv, _ = b.await(wire.TypeToolResult)
	if r := decode[wire.ToolResult](t, resEnv); !strings.Contains(r.Error, "context canceled") && !strings.Contains(r.Error, "interrupted") {
		t.Errorf("interrupted host call: %+v", r)
	}
	if d := decode[wire.TurnDone](t, mustAwait(b, wire.TypeTurnDone)); d.Reason != wire.ReasonInterrupted {
		t.Errorf("turn_done %+v", d)
	}
	for name, env := range got {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, normalize(t, env, nil)) })
	}
}

func mustAwait(c *client, typ wire.Type) wire.Envelope {
	env, _ := c.await(typ)
	return env
}

// TestHostToolsOnlyFromTheBridge: a bridge that does not say it has host
// tools is not asked, and a client may not send host tool messages.
func TestHostToolsOnlyFromTheBridge(t *testing.T) {
	model := &toolsModel{}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{echoTool()}}})
	b := e.dialBridge() // an older bridge: no host_tools in its hello
	b.send(userMessage("c1/m1", "hi"))
	_, before := b.await(wire.TypeTurnDone)
	for _, env := range before {
		if wire.IsHostTool(env.Type) {
			t.Errorf("an older bridge was sent %s", env.Type)
		}
	}
	c := e.dial(session.DefaultThread)
	c.send(wire.MustNew(wire.TypeHostResult, "", "hc_1", wire.HostResult{Output: "forged"}))
	if got, _ := c.await(wire.TypeError); decode[wire.Error](t, got).Code != wire.CodeNotAllowed {
		t.Errorf("a client's host_result: %s", got.Data)
	}
}

// TestHostProgressSentBeforeTheResultIsKept: progress the bridge sends
// right before the result, with no wait between them, all streams as
// tool_output before the tool_result (the wait could take the result
// first and leave the queued progress behind).
func TestHostProgressSentBeforeTheResultIsKept(t *testing.T) {
	const rounds, burst = 20, 10
	var steps []step
	for i := range rounds {
		steps = append(steps, step{calls: []loop.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "gh_search", Arguments: `{"query":"x"}`}}}, step{text: "ok"})
	}
	model := &toolsModel{steps: steps}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model}})
	b := e.dialHostBridge()
	list := wire.HostTools{Tools: []wire.HostTool{{Name: "gh_search", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	for i := range rounds {
		b.send(userMessage(fmt.Sprintf("c1/m%d", i), "search"))
		ask, _ := b.await(wire.TypeHostToolsList)
		b.send(wire.MustNew(wire.TypeHostTools, goldenThread, ask.ID, list))
		chk, _ := b.await(wire.TypeToolCheck)
		b.send(wire.MustNew(wire.TypeToolVerdict, "", chk.ID, wire.ToolVerdict{Allowed: true}))
		call, _ := b.await(wire.TypeHostCall)
		var want strings.Builder
		for n := range burst {
			b.send(wire.MustNew(wire.TypeHostProgress, goldenThread, call.ID, wire.HostProgress{Message: fmt.Sprintf("p%d", n)}))
			fmt.Fprintf(&want, "p%d\r\n", n)
		}
		b.send(wire.MustNew(wire.TypeHostResult, goldenThread, call.ID, wire.HostResult{Output: "done"}))
		_, seen := b.await(wire.TypeToolResult)
		var got strings.Builder
		for _, env := range seen {
			if env.Type == wire.TypeToolOutput {
				got.WriteString(decode[wire.ToolOutput](t, env).Output)
			}
		}
		if got.String() != want.String() {
			t.Fatalf("round %d: tool_output before the result %q, want %q", i, got.String(), want.String())
		}
		b.await(wire.TypeTurnDone)
	}
}
