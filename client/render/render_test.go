package render_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func ev(typ wire.Type, id string, payload any) wire.Envelope {
	return wire.MustNew(typ, "t_1", id, payload)
}

func exit(n int) *int { return &n }

// script is a conversation that exercises every event type and the
// awkward cases: chunk boundaries inside \r\n, progress bars (lone \r),
// results without streamed output, truncation, errors.
func script() []wire.Envelope {
	return []wire.Envelope{
		{Type: wire.TypeHello, Data: json.RawMessage(`{"version":1,"role":"bridge"}`)},
		ev(wire.TypeUserEcho, "m-own", wire.UserMessage{Text: "list the files"}),
		ev(wire.TypeAssistantDelta, "m-own", wire.Text{Text: "Let me "}),
		ev(wire.TypeAssistantDelta, "m-own", wire.Text{Text: "check."}),
		ev(wire.TypeAssistantMessage, "m-own", wire.Text{Text: "Let me check."}),
		ev(wire.TypeToolCall, "m-own", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: json.RawMessage(`{"command":"echo hello\necho bye","timeout":5}`)}),
		ev(wire.TypeToolOutput, "m-own", wire.ToolOutput{CallID: "c1", Output: "hel"}),
		ev(wire.TypeToolOutput, "m-own", wire.ToolOutput{CallID: "c1", Output: "lo\r"}),
		ev(wire.TypeToolOutput, "m-own", wire.ToolOutput{CallID: "c1", Output: "\nbye\r\n10%\r50%\r100%"}),
		ev(wire.TypeToolResult, "m-own", wire.ToolResult{CallID: "c1", Name: "execute", ExitCode: exit(0), Output: "hello\nbye\n"}),
		ev(wire.TypeToolCall, "m-own", wire.ToolCall{CallID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"/workspace/a-very-long-directory-name/another-long-directory-name/file.go"}`)}),
		ev(wire.TypeToolResult, "m-own", wire.ToolResult{CallID: "c2", Name: "read", Output: "1\n2\n3\n4\n5\n6\n", Truncated: true, TotalBytes: 123456}),
		ev(wire.TypeToolCall, "m-own", wire.ToolCall{CallID: "c3", Name: "glob", Arguments: json.RawMessage(`{"glob":"**/*.go", "limit": 3}`)}),
		ev(wire.TypeToolResult, "m-own", wire.ToolResult{CallID: "c3", Name: "glob", Error: "no match\nsecond line"}),
		ev(wire.TypeToolCall, "m-own", wire.ToolCall{CallID: "c4", Name: "execute", Arguments: json.RawMessage(`{"command":"false"}`)}),
		ev(wire.TypeToolOutput, "m-own", wire.ToolOutput{CallID: "c4", Output: "partial"}),
		ev(wire.TypeToolResult, "m-own", wire.ToolResult{CallID: "c4", Name: "execute", ExitCode: exit(1), Output: "partial"}),
		ev(wire.TypeAssistantMessage, "m-own", wire.Text{Text: "Done without streaming."}),
		ev(wire.TypeTurnDone, "m-own", wire.TurnDone{Reason: wire.ReasonStop}),
		ev(wire.TypeUserEcho, "m-other", wire.UserMessage{Text: "from another client"}),
		ev(wire.TypeAssistantDelta, "m-other", wire.Text{Text: "Work"}),
		ev(wire.TypeToolCall, "m-other", wire.ToolCall{CallID: "c5", Name: "execute", Arguments: json.RawMessage(`{"command":"sleep 100"}`)}),
		ev(wire.TypeToolOutput, "m-other", wire.ToolOutput{CallID: "c5", Output: "waiting"}),
		ev(wire.TypeAssistantDelta, "m-other", wire.Text{Text: "ing"}),
		ev(wire.TypeTurnDone, "m-other", wire.TurnDone{Reason: wire.ReasonInterrupted}),
		wire.ErrorEnvelope("t_1", "m-x", wire.CodeBusy, "a turn is running"),
		ev(wire.TypeUserEcho, "m-3", wire.UserMessage{Text: "again"}),
		wire.ErrorEnvelope("t_1", "m-3", wire.CodeLLM, "model endpoint: 502 bad gateway"),
		ev(wire.TypeTurnDone, "m-3", wire.TurnDone{Reason: wire.ReasonError}),
		{Type: "sandbox_replaced", Thread: "t_1", Seq: 40},
		ev(wire.TypeEventsLost, "", wire.EventsLost{From: 3, To: 5, Count: 3, Message: "the agent no longer held agent seqs 3..5"}),
		{Type: wire.TypeToolCall, Data: json.RawMessage(`{"call_id":7}`)},
		ev(wire.TypeTurnDone, "m-4", wire.TurnDone{Reason: wire.ReasonStepLimit}),
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		color, fold bool
	}{{"plain", false, false}, {"color", true, false}, {"fold", true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := render.New(&buf, render.Options{Color: tt.color, Fold: tt.fold, Width: func() int { return 40 }})
			for _, env := range script() {
				if err := r.Render(env); err != nil {
					t.Fatalf("render %s: %v", env.Type, err)
				}
			}
			if err := r.Prompt("› "); err != nil {
				t.Fatal(err)
			}
			if err := r.Render(ev(wire.TypeUserEcho, "m-5", wire.UserMessage{Text: "while at the prompt"})); err != nil {
				t.Fatal(err)
			}
			if err := r.Printf("connection closed: %s", "EOF"); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("output differs from %s (run with -update after checking):\n--- got\n%s\n--- want\n%s", golden, buf.Bytes(), want)
			}
		})
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWriteErrorSticks(t *testing.T) {
	t.Parallel()
	r := render.New(&failWriter{n: 1}, render.Options{})
	if err := r.Render(ev(wire.TypeAssistantDelta, "m", wire.Text{Text: "a"})); err != nil {
		t.Fatalf("first write: %v", err)
	}
	var failed bool
	for _, env := range script() {
		err := r.Render(env)
		if failed && err == nil {
			t.Fatalf("render %s after a failed write: no error", env.Type)
		}
		failed = err != nil
	}
	if !failed {
		t.Fatal("no write error reported")
	}
}
