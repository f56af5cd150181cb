package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func intp(i int) *int { return &i }

// golden lists one example of every message type, as it travels.
var golden = []struct {
	name string
	env  wire.Envelope
}{
	{"hello_client", wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t_4f9c2a1b3c5d", AfterSeq: 12})},
	{"hello_bridge", wire.MustNew(wire.TypeHello, "t_4f9c2a1b3c5d", "", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Software: "boxwire-bridge/0.1.0", Thread: "t_4f9c2a1b3c5d"})},
	{"user_message", wire.MustNew(wire.TypeUserMessage, "t_4f9c2a1b3c5d", "m1", wire.UserMessage{Text: "say hello into a file"})},
	{"interrupt", wire.MustNew(wire.TypeInterrupt, "t_4f9c2a1b3c5d", "m2", nil)},
	{"ping", wire.MustNew(wire.TypePing, "", "p1", nil)},
	{"pong", wire.MustNew(wire.TypePong, "", "p1", nil)},
	{"user_echo", withSeq(wire.MustNew(wire.TypeUserEcho, "t_4f9c2a1b3c5d", "m1", wire.UserMessage{Text: "say hello into a file"}), 1)},
	{"assistant_delta", withSeq(wire.MustNew(wire.TypeAssistantDelta, "t_4f9c2a1b3c5d", "m1", wire.Text{Text: "Let me "}), 2)},
	{"assistant_message", withSeq(wire.MustNew(wire.TypeAssistantMessage, "t_4f9c2a1b3c5d", "m1", wire.Text{Text: "Let me write it."}), 3)},
	{"tool_call", withSeq(wire.MustNew(wire.TypeToolCall, "t_4f9c2a1b3c5d", "m1", wire.ToolCall{CallID: "call_1", Name: "execute", Arguments: json.RawMessage(`{"command":"echo hello > /workspace/x && cat /workspace/x"}`)}), 4)},
	{"tool_output", withSeq(wire.MustNew(wire.TypeToolOutput, "t_4f9c2a1b3c5d", "m1", wire.ToolOutput{CallID: "call_1", Output: "hello\r\n"}), 5)},
	{"tool_result", withSeq(wire.MustNew(wire.TypeToolResult, "t_4f9c2a1b3c5d", "m1", wire.ToolResult{CallID: "call_1", Name: "execute", ExitCode: intp(0), Output: "hello\r\n"}), 6)},
	{"tool_result_truncated", withSeq(wire.MustNew(wire.TypeToolResult, "t_4f9c2a1b3c5d", "m1", wire.ToolResult{CallID: "call_2", Name: "execute", Status: wire.StatusExited, ExitCode: intp(0), Output: "0\n1\n... [488890 bytes omitted] ...\n99999\n", Truncated: true, TotalBytes: 488890, TotalLines: 100000, OutputPath: "/tmp/boxwire/output/call_2.log"}), 7)},
	{"tool_result_awaiting_input", withSeq(wire.MustNew(wire.TypeToolResult, "t_4f9c2a1b3c5d", "m1", wire.ToolResult{CallID: "call_4", Name: "execute", Status: wire.StatusAwaitingInput, JobID: "job_1", Output: "Password: "}), 11)},
	{"tool_result_error", withSeq(wire.MustNew(wire.TypeToolResult, "t_4f9c2a1b3c5d", "m1", wire.ToolResult{CallID: "call_3", Name: "read_file", Error: "path /etc/passwd is outside the workspace /workspace"}), 8)},
	{"turn_done", withSeq(wire.MustNew(wire.TypeTurnDone, "t_4f9c2a1b3c5d", "m1", wire.TurnDone{Reason: wire.ReasonStop, Usage: &wire.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}}), 9)},
	{"error_reply", wire.ErrorEnvelope("t_4f9c2a1b3c5d", "m3", wire.CodeBusy, "a turn is running; interrupt it first")},
	{"error_event", withSeq(wire.ErrorEnvelope("t_4f9c2a1b3c5d", "m1", wire.CodeLLM, "model endpoint answered 429: rate limited"), 10)},
}

// indent renders env as wire.Marshal does, indented for reading.
func indent(t *testing.T, env wire.Envelope) []byte {
	t.Helper()
	raw, err := wire.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func withSeq(e wire.Envelope, seq uint64) wire.Envelope { e.Seq = seq; return e }

func TestGolden(t *testing.T) {
	seen := map[wire.Type]bool{}
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			got := indent(t, g.env)
			path := filepath.Join("testdata", g.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s changed:\n got: %s\nwant: %s", path, got, want)
			}
			// The golden text parses back to the same envelope.
			back, err := wire.Parse(want)
			if err != nil {
				t.Fatal(err)
			}
			if again := indent(t, back); !bytes.Equal(again, want) {
				t.Errorf("round trip differs: %s", again)
			}
			if !wire.Known(back.Type) {
				t.Errorf("type %q is not Known", back.Type)
			}
			if wire.IsEvent(back.Type) != (back.Seq != 0) && back.Type != wire.TypeError {
				t.Errorf("type %q: IsEvent=%v but seq=%d", back.Type, wire.IsEvent(back.Type), back.Seq)
			}
		})
		seen[g.env.Type] = true
	}
	for _, typ := range allTypes {
		if !seen[typ] {
			t.Errorf("no golden file for %q", typ)
		}
	}
}

var allTypes = []wire.Type{
	wire.TypeHello, wire.TypeUserMessage, wire.TypeInterrupt, wire.TypePing, wire.TypePong,
	wire.TypeUserEcho, wire.TypeAssistantDelta, wire.TypeAssistantMessage, wire.TypeToolCall,
	wire.TypeToolOutput, wire.TypeToolResult, wire.TypeTurnDone, wire.TypeError,
}

func TestDecodePayload(t *testing.T) {
	env := wire.MustNew(wire.TypeToolResult, "t", "m", wire.ToolResult{CallID: "c", ExitCode: intp(3)})
	var res wire.ToolResult
	if err := env.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 || res.CallID != "c" {
		t.Fatalf("decoded %+v", res)
	}
	if err := (wire.Envelope{Type: wire.TypeUserMessage}).Decode(&wire.UserMessage{}); err == nil {
		t.Fatal("decoding a missing payload succeeded")
	}
	bad := wire.Envelope{Type: wire.TypeUserMessage, Data: json.RawMessage(`{"text":5}`)}
	if err := bad.Decode(&wire.UserMessage{}); err == nil {
		t.Fatal("decoding a mistyped payload succeeded")
	}
}

func TestReadMessage(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		limit   int
		wantErr func(error) bool
		want    wire.Type
	}{
		{"ok", `{"type":"ping","id":"1"}`, 100, nil, wire.TypePing},
		{"unknown type still parses", `{"type":"bogus"}`, 100, nil, "bogus"},
		{"not json", `hello`, 100, isCode(wire.CodeBadMessage), ""},
		{"no type", `{"id":"1"}`, 100, isCode(wire.CodeBadMessage), ""},
		{"array", `[1,2]`, 100, isCode(wire.CodeBadMessage), ""},
		{"exactly the limit", `{"type":"ping","id":"12345"}`, 28, nil, wire.TypePing},
		{"one over the limit", `{"type":"ping","id":"123456"}`, 28, func(err error) bool { return errors.Is(err, wire.ErrTooLarge) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReader(tt.in)
			env, err := wire.ReadMessage(r, tt.limit)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				if r.Len() != 0 {
					t.Fatalf("%d bytes left unread", r.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.Type != tt.want {
				t.Fatalf("type = %q, want %q", env.Type, tt.want)
			}
		})
	}
}

func isCode(c wire.Code) func(error) bool {
	return func(err error) bool {
		var we wire.Error
		return errors.As(err, &we) && we.Code == c
	}
}

func TestKnownAndEvents(t *testing.T) {
	if wire.Known("bogus") || wire.IsEvent("bogus") {
		t.Fatal("an unknown type counts as known")
	}
	for _, typ := range []wire.Type{wire.TypeHello, wire.TypeUserMessage, wire.TypeInterrupt, wire.TypePing, wire.TypePong} {
		if wire.IsEvent(typ) {
			t.Errorf("%s counted as an event", typ)
		}
	}
}
