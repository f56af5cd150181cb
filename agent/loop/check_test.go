package loop_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestCheck: a refused call does not run, its result says why, and the
// model carries on; an allowed one runs.
func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		allow   bool
		wantErr string
		ran     int32
	}{
		{"allowed", true, "", 1},
		{"refused", false, "not run: denied by c1: no pushing", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran, asked atomic.Int32
			tool := fakeTool{name: "execute", run: func(context.Context, tools.Call) tools.Result {
				ran.Add(1)
				return tools.Result{Output: "pushed"}
			}}
			model := &fakeModel{steps: []step{
				{calls: []loop.ToolCall{{ID: "c1", Name: "execute", Arguments: `{"command":"git push"}`}}},
				{deltas: []string{"ok"}},
			}}
			l := loop.New(loop.Config{Model: model, Tools: []tools.Tool{tool},
				Check: func(_ context.Context, call loop.ToolCall) (bool, string) {
					asked.Add(1)
					if call.Name != "execute" || call.Arguments != `{"command":"git push"}` {
						t.Errorf("checked %+v", call)
					}
					return tc.allow, "denied by c1: no pushing"
				}})
			rec := &recorder{}
			if td := runTurn(t, context.Background(), l, &loop.Conversation{}, "go", rec); td.Reason != wire.ReasonStop {
				t.Fatalf("reason %q", td.Reason)
			}
			if asked.Load() != 1 || ran.Load() != tc.ran {
				t.Fatalf("asked %d, ran %d", asked.Load(), ran.Load())
			}
			res := decode[wire.ToolResult](t, rec.first(t, wire.TypeToolResult))
			if res.Error != tc.wantErr {
				t.Fatalf("result error %q, want %q", res.Error, tc.wantErr)
			}
			last := model.requests()[1].Messages
			if msg := last[len(last)-1]; tc.wantErr != "" && !strings.Contains(msg.Content, tc.wantErr) {
				t.Fatalf("model was told %q", msg.Content)
			}
		})
	}
}
