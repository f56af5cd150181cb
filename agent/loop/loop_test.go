package loop_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTurnEventOrderAndHistory(t *testing.T) {
	model := &fakeModel{steps: []step{
		{deltas: []string{"Let me ", "look."}, calls: []loop.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"x":1}`}}, usage: wire.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}},
		{deltas: []string{"Done."}, usage: wire.Usage{PromptTokens: 20, CompletionTokens: 1, TotalTokens: 21}},
	}}
	l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{echoTool()}, Workspace: "/ws"})
	conv := &loop.Conversation{}
	rec := &recorder{}

	td := runTurn(t, context.Background(), l, conv, "hi", rec)

	want := []wire.Type{
		wire.TypeAssistantDelta, wire.TypeAssistantDelta, wire.TypeAssistantMessage,
		wire.TypeToolCall, wire.TypeToolOutput, wire.TypeToolOutput, wire.TypeToolResult,
		wire.TypeAssistantDelta, wire.TypeAssistantMessage, wire.TypeTurnDone,
	}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	if td.Reason != wire.ReasonStop || td.Usage == nil || *td.Usage != (wire.Usage{PromptTokens: 30, CompletionTokens: 3, TotalTokens: 33}) {
		t.Fatalf("turn_done = %+v usage %+v", td, td.Usage)
	}
	if got := decode[wire.TurnDone](t, rec.all()[9]); got.Reason != wire.ReasonStop {
		t.Fatalf("emitted turn_done %+v", got)
	}
	for _, e := range rec.all() {
		if e.Seq != 0 || e.ID != "" || e.Thread != "" {
			t.Fatalf("loop stamped %s with seq/id/thread: %+v", e.Type, e)
		}
	}
	call := decode[wire.ToolCall](t, rec.first(t, wire.TypeToolCall))
	if call.CallID != "c1" || call.Name != "echo" || string(call.Arguments) != `{"x":1}` {
		t.Fatalf("tool_call %+v", call)
	}
	res := decode[wire.ToolResult](t, rec.first(t, wire.TypeToolResult))
	if res.Output != `{"x":1}` || res.ExitCode == nil || *res.ExitCode != 0 || res.Error != "" {
		t.Fatalf("tool_result %+v", res)
	}
	if msg := decode[wire.Text](t, rec.first(t, wire.TypeAssistantMessage)); msg.Text != "Let me look." {
		t.Fatalf("assistant_message %q", msg.Text)
	}

	msgs := conv.Messages()
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Fatalf("history roles %v, want %v", roles, want)
	}
	checkHistory(t, msgs)

	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	sys := reqs[0].Messages[0]
	if sys.Role != loop.RoleSystem || !strings.Contains(sys.Content, "/ws") || !strings.Contains(sys.Content, "echo") {
		t.Fatalf("system prompt %+v", sys)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "echo" {
		t.Fatalf("tool defs %+v", reqs[0].Tools)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != loop.RoleTool || last.ToolCallID != "c1" || last.Content != "{\"x\":1}\n[exit code 0]" {
		t.Fatalf("second request ends with %+v", last)
	}
}

func TestTurnToolFailures(t *testing.T) {
	failing := fakeTool{name: "fail", run: func(context.Context, tools.Call) tools.Result {
		return tools.Result{Output: "partial", Err: "disk full"}
	}}
	panicking := fakeTool{name: "boom", run: func(context.Context, tools.Call) tools.Result { panic("kaboom") }}
	tests := []struct {
		name      string
		call      loop.ToolCall
		wantErr   string
		wantModel string
	}{
		{"tool error", loop.ToolCall{ID: "a", Name: "fail", Arguments: "{}"}, "disk full", "error: disk full\npartial"},
		{"unknown tool", loop.ToolCall{ID: "b", Name: "nope", Arguments: "{}"}, `unknown tool "nope"`, "boom, echo, fail"},
		{"invalid json", loop.ToolCall{ID: "c", Name: "echo", Arguments: `{"x":`}, "not a valid JSON", "not a valid JSON"},
		{"panic", loop.ToolCall{ID: "d", Name: "boom", Arguments: ""}, "crashed: kaboom", "kaboom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeModel{steps: []step{{calls: []loop.ToolCall{tc.call}}, {deltas: []string{"ok"}}}}
			l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{echoTool(), failing, panicking}})
			conv := &loop.Conversation{}
			rec := &recorder{}
			if td := runTurn(t, context.Background(), l, conv, "go", rec); td.Reason != wire.ReasonStop {
				t.Fatalf("reason %q", td.Reason)
			}
			res := decode[wire.ToolResult](t, rec.first(t, wire.TypeToolResult))
			if !strings.Contains(res.Error, tc.wantErr) {
				t.Fatalf("tool_result error %q, want it to contain %q", res.Error, tc.wantErr)
			}
			// The tool_call event must carry valid JSON even for bad arguments.
			if call := decode[wire.ToolCall](t, rec.first(t, wire.TypeToolCall)); len(call.Arguments) == 0 {
				t.Fatalf("tool_call without arguments")
			}
			reqs := model.requests()
			toolMsg := reqs[1].Messages[len(reqs[1].Messages)-1]
			if toolMsg.Role != loop.RoleTool || toolMsg.ToolCallID != tc.call.ID || !strings.Contains(toolMsg.Content, tc.wantModel) {
				t.Fatalf("model was told %+v, want it to contain %q", toolMsg, tc.wantModel)
			}
			checkHistory(t, conv.Messages())
		})
	}
}

func TestTurnModelError(t *testing.T) {
	model := &fakeModel{steps: []step{{deltas: []string{"par"}, err: errors.New("model endpoint answered 500: boom")}}}
	l := loop.New(loop.Config{Model: model})
	rec := &recorder{}
	conv := &loop.Conversation{}
	td := runTurn(t, context.Background(), l, conv, "hi", rec)
	if td.Reason != wire.ReasonError {
		t.Fatalf("reason %q", td.Reason)
	}
	want := []wire.Type{wire.TypeAssistantDelta, wire.TypeAssistantMessage, wire.TypeError, wire.TypeTurnDone}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	e := decode[wire.Error](t, rec.first(t, wire.TypeError))
	if e.Code != wire.CodeLLM || !strings.Contains(e.Message, "500") {
		t.Fatalf("error %+v", e)
	}
	checkHistory(t, conv.Messages())
}

func TestTurnStepLimit(t *testing.T) {
	model := &fakeModel{fallback: &step{calls: []loop.ToolCall{{Name: "echo", Arguments: "{}"}}}}
	l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{echoTool()}, MaxSteps: 3})
	conv := &loop.Conversation{}
	rec := &recorder{}
	if td := runTurn(t, context.Background(), l, conv, "loop", rec); td.Reason != wire.ReasonStepLimit {
		t.Fatalf("reason %q, want step_limit", td.Reason)
	}
	if n := len(model.requests()); n != 3 {
		t.Fatalf("model called %d times, want 3", n)
	}
	msgs := conv.Messages()
	checkHistory(t, msgs)
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID == "" || ids[c.ID] {
				t.Fatalf("tool call id %q empty or repeated", c.ID)
			}
			ids[c.ID] = true
		}
	}
}

func TestTurnInterruptMidTool(t *testing.T) {
	started := make(chan struct{})
	model := &fakeModel{steps: []step{
		{calls: []loop.ToolCall{{ID: "s1", Name: "sleep", Arguments: "{}"}, {ID: "s2", Name: "echo", Arguments: "{}"}}},
		{deltas: []string{"second turn"}},
	}}
	l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{blockingTool(started), echoTool()}})
	conv := &loop.Conversation{}
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-started:
			cancel()
		case <-time.After(10 * time.Second):
		}
	}()
	if td := runTurn(t, ctx, l, conv, "run", rec); td.Reason != wire.ReasonInterrupted {
		t.Fatalf("reason %q, want interrupted", td.Reason)
	}
	var results []wire.ToolResult
	for _, e := range rec.all() {
		if e.Type == wire.TypeToolResult {
			results = append(results, decode[wire.ToolResult](t, e))
		}
	}
	if len(results) != 2 || results[0].Error == "" || !strings.Contains(results[1].Error, "not run") {
		t.Fatalf("tool results %+v", results)
	}
	checkHistory(t, conv.Messages())

	// The next turn works and the model sees a consistent history.
	rec2 := &recorder{}
	if td := runTurn(t, context.Background(), l, conv, "again", rec2); td.Reason != wire.ReasonStop {
		t.Fatalf("second turn reason %q", td.Reason)
	}
	checkHistory(t, conv.Messages())
}

func TestTurnInterruptWhileStreaming(t *testing.T) {
	// The interrupt comes once the model has streamed: sooner, the turn
	// would end before the model call, with no delta to keep.
	blocked := make(chan struct{})
	model := &fakeModel{steps: []step{{deltas: []string{"thinking"}, block: true, blocked: blocked}}}
	l := loop.New(loop.Config{Model: model})
	conv := &loop.Conversation{}
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-blocked:
		case <-time.After(10 * time.Second):
		}
		cancel()
	}()
	if td := runTurn(t, ctx, l, conv, "hi", rec); td.Reason != wire.ReasonInterrupted {
		t.Fatalf("reason %q", td.Reason)
	}
	want := []wire.Type{wire.TypeAssistantDelta, wire.TypeAssistantMessage, wire.TypeTurnDone}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if msgs := conv.Messages(); len(msgs) != 2 || msgs[1].Content != "thinking" {
		t.Fatalf("history %+v", msgs)
	}
}

func TestToolOutputKeepsRunesWhole(t *testing.T) {
	split := fakeTool{name: "split", run: func(_ context.Context, call tools.Call) tools.Result {
		b := []byte("é€x") // 2 + 3 + 1 bytes
		for i := range b {
			call.Output(b[i : i+1])
		}
		call.Output([]byte{0xe2, 0x82}) // an unfinished rune at the end
		return tools.Result{Output: "ok"}
	}}
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "u", Name: "split"}}}, {deltas: []string{"ok"}}}}
	rec := &recorder{}
	runTurn(t, context.Background(), loop.New(loop.Config{Model: model, Tools: []tools.Tool{split}}), &loop.Conversation{}, "x", rec)
	var out strings.Builder
	for _, e := range rec.all() {
		if e.Type == wire.TypeToolOutput {
			out.WriteString(decode[wire.ToolOutput](t, e).Output)
		}
	}
	if got := out.String(); got != "é€x\uFFFD" {
		t.Fatalf("output %q", got)
	}
}

func TestDefaultSystemPrompt(t *testing.T) {
	p := loop.DefaultSystemPrompt("", []tools.Tool{echoTool()})
	if !strings.Contains(p, loop.DefaultWorkspace) || !strings.Contains(p, "echo") {
		t.Fatalf("prompt %q", p)
	}
}
