package loop_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/bridge/wire"
)

func hev(typ wire.Type, id string, payload any) wire.Envelope {
	return wire.MustNew(typ, "t1", id, payload)
}

func TestFromEvents(t *testing.T) {
	zero := 0
	call := func(id string) wire.ToolCall {
		return wire.ToolCall{CallID: id, Name: "execute", Arguments: json.RawMessage(`{"command":"ls"}`)}
	}
	lsCall := func(id string) loop.ToolCall {
		return loop.ToolCall{ID: id, Name: "execute", Arguments: `{"command":"ls"}`}
	}
	tests := []struct {
		name   string
		events []wire.Envelope
		want   []loop.Message
	}{
		{"text turn", []wire.Envelope{
			hev(wire.TypeUserEcho, "m1", wire.UserMessage{Text: "hi"}),
			hev(wire.TypeAssistantDelta, "m1", wire.Text{Text: "he"}),
			hev(wire.TypeAssistantMessage, "m1", wire.Text{Text: "hello"}),
			hev(wire.TypeTurnDone, "m1", wire.TurnDone{Reason: wire.ReasonStop}),
		}, []loop.Message{{Role: loop.RoleUser, Content: "hi"}, {Role: loop.RoleAssistant, Content: "hello"}}},
		{"tool turn", []wire.Envelope{
			hev(wire.TypeUserEcho, "m1", wire.UserMessage{Text: "ls"}),
			hev(wire.TypeAssistantMessage, "m1", wire.Text{Text: "listing"}),
			hev(wire.TypeToolCall, "m1", call("c1")),
			hev(wire.TypeToolOutput, "m1", wire.ToolOutput{CallID: "c1", Output: "a\n"}),
			hev(wire.TypeToolResult, "m1", wire.ToolResult{CallID: "c1", Name: "execute", ExitCode: &zero, Output: "a\n"}),
			hev(wire.TypeToolCall, "r9", call("run_1")), // a run_tool request: not conversation
			hev(wire.TypeAssistantMessage, "m1", wire.Text{Text: "done"}),
			hev(wire.TypeTurnDone, "m1", wire.TurnDone{Reason: wire.ReasonStop}),
		}, []loop.Message{
			{Role: loop.RoleUser, Content: "ls"},
			{Role: loop.RoleAssistant, Content: "listing", ToolCalls: []loop.ToolCall{lsCall("c1")}},
			{Role: loop.RoleTool, ToolCallID: "c1", Content: "a\n[exit code 0]"},
			{Role: loop.RoleAssistant, Content: "done"},
		}},
		{"sandbox died mid-call", []wire.Envelope{
			hev(wire.TypeUserEcho, "m1", wire.UserMessage{Text: "sleep"}),
			hev(wire.TypeToolCall, "m1", call("c1")),
			hev(wire.TypeSandboxExited, "", wire.SandboxExited{Reason: wire.ExitDied}),
			hev(wire.TypeUserEcho, "m2", wire.UserMessage{Text: "again"}),
		}, []loop.Message{
			{Role: loop.RoleUser, Content: "sleep"},
			{Role: loop.RoleAssistant, ToolCalls: []loop.ToolCall{lsCall("c1")}},
			{Role: loop.RoleTool, ToolCallID: "c1", Content: "error: no result: the sandbox stopped while this call ran"},
			{Role: loop.RoleUser, Content: "again"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := loop.FromEvents(tc.events)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("FromEvents:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
