package loop_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// bigTool returns 4000 bytes of output tagged with its call id.
func bigTool() fakeTool {
	return fakeTool{name: "big", run: func(_ context.Context, call tools.Call) tools.Result {
		return tools.Result{Output: call.ID + ":" + strings.Repeat("x", 4000)}
	}}
}

func TestBudgetShortensOldestToolOutputs(t *testing.T) {
	var steps []step
	for i := range 6 {
		steps = append(steps, step{calls: []loop.ToolCall{{ID: fmt.Sprintf("b%d", i), Name: "big"}}})
	}
	steps = append(steps, step{deltas: []string{"done"}})
	model := &fakeModel{steps: steps}
	// About 1000 tokens per output; a budget of 3000 fits the prompt and
	// about two outputs whole.
	l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{bigTool()}, Budget: 3000, SystemPrompt: "s"})
	conv := &loop.Conversation{}
	if td := runTurn(t, context.Background(), l, conv, "go", &recorder{}); td.Reason != wire.ReasonStop {
		t.Fatalf("reason %q", td.Reason)
	}
	reqs := model.requests()
	last := reqs[len(reqs)-1]
	var whole, short []string
	size := 0
	for _, m := range last.Messages {
		size += len(m.Content)
		if m.Role != loop.RoleTool {
			continue
		}
		id, _, _ := strings.Cut(m.Content, ":")
		if strings.Contains(m.Content, "older tool output shortened") {
			short = append(short, id)
		} else {
			whole = append(whole, id)
		}
	}
	if !slices.Equal(short, []string{"b0", "b1", "b2", "b3"}) || !slices.Equal(whole, []string{"b4", "b5"}) {
		t.Fatalf("shortened %v, whole %v; want the oldest shortened first", short, whole)
	}
	if size/4 > 3000 {
		t.Errorf("request is about %d tokens, budget 3000", size/4)
	}
	// The conversation keeps every output whole.
	for _, m := range conv.Messages() {
		if m.Role == loop.RoleTool && strings.Contains(m.Content, "shortened") {
			t.Fatalf("conversation was modified: %q", m.Content[:50])
		}
	}
}

func TestSeveralCallsInOneAnswer(t *testing.T) {
	model := &fakeModel{steps: []step{
		{deltas: []string{"three at once"}, calls: []loop.ToolCall{
			{ID: "a", Name: "echo", Arguments: `{"n":1}`},
			{ID: "b", Name: "echo", Arguments: `{"n":2}`},
			{ID: "c", Name: "echo", Arguments: `{"n":3}`},
		}},
		{deltas: []string{"ok"}},
	}}
	l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{echoTool()}})
	conv := &loop.Conversation{}
	rec := &recorder{}
	runTurn(t, context.Background(), l, conv, "go", rec)
	var order []string
	for _, e := range rec.all() {
		switch e.Type {
		case wire.TypeToolCall:
			order = append(order, "call "+decode[wire.ToolCall](t, e).CallID)
		case wire.TypeToolResult:
			order = append(order, "result "+decode[wire.ToolResult](t, e).CallID)
		}
	}
	want := []string{"call a", "result a", "call b", "result b", "call c", "result c"}
	if !slices.Equal(order, want) {
		t.Fatalf("events %v, want %v", order, want)
	}
	checkHistory(t, conv.Messages())
	reqs := model.requests()
	msgs := reqs[1].Messages
	if n := len(msgs); msgs[n-3].ToolCallID != "a" || msgs[n-2].ToolCallID != "b" || msgs[n-1].ToolCallID != "c" {
		t.Fatalf("answers out of order: %+v", msgs[n-3:])
	}
}

// TestInterruptWithRealCommand interrupts a turn whose command ignores
// SIGTERM; the turn must end within a second or so of the interrupt.
func TestInterruptWithRealCommand(t *testing.T) {
	// A HOME of its own: the host's login files must not run first.
	set := tools.New(tools.Config{Workspace: t.TempDir(), OutputDir: t.TempDir(), Env: []string{"HOME=" + t.TempDir()}})
	defer set.Close()
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{
		{ID: "x", Name: "execute", Arguments: `{"command": "trap '' TERM HUP; echo started; sleep 1000"}`},
		{ID: "y", Name: "execute", Arguments: `{"command": "echo never"}`},
	}}}}
	l := loop.New(loop.Config{Model: model, Tools: set.All()})
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{}
	var cancelled time.Time
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, e := range rec.all() {
				if e.Type == wire.TypeToolOutput {
					cancelled = time.Now()
					cancel()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	td := runTurn(t, ctx, l, &loop.Conversation{}, "go", rec)
	took := time.Since(cancelled)
	if td.Reason != wire.ReasonInterrupted {
		t.Fatalf("reason %q", td.Reason)
	}
	t.Logf("turn ended %v after the interrupt", took)
	if took > 3*time.Second { // a second plus slack for a loaded machine
		t.Errorf("turn ended %v after the interrupt", took)
	}
	var results []wire.ToolResult
	for _, e := range rec.all() {
		if e.Type == wire.TypeToolResult {
			results = append(results, decode[wire.ToolResult](t, e))
		}
	}
	if len(results) != 2 || results[0].Status != wire.StatusInterrupted || !strings.Contains(results[1].Error, "not run") {
		t.Fatalf("results %+v", results)
	}
}
