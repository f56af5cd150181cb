package llmscript_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/boxwire/boxwire/e2e/llmscript"
)

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"not json", `{"turns":`, "parse script"},
		{"unknown field", `{"turns":[{"steps":[{"contnet":"x"}]}]}`, "unknown field"},
		{"trailing data", `{"turns":[{"steps":[{"content":"x"}]}]} {}`, "trailing data"},
		{"no turns", `{"turns":[]}`, "no turns"},
		{"empty step", `{"turns":[{"steps":[{}]}]}`, "turn 0 step 0: has no content"},
		{"two answers", `{"turns":[{"steps":[{"content":"x"},{"content":"y","error":{"status":500,"message":"m"}}]}]}`, "turn 0 step 1: has an error and an answer"},
		{"tool call without name", `{"turns":[{"steps":[{"tool_calls":[{"arguments":{}}]}]}]}`, "no name"},
		{"bad status", `{"turns":[{"steps":[{"error":{"status":200,"message":"m"}}]}]}`, "outside 400-599"},
		{"error without message", `{"turns":[{"steps":[{"error":{"status":500}}]}]}`, "without a message"},
		{"negative delay", `{"turns":[{"steps":[{"content":"x","delay_ms":-1}]}]}`, "negative delay"},
		{"negative cut", `{"turns":[{"steps":[{"content":"x","cut_after_chunks":-1}]}]}`, "negative cut_after_chunks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llmscript.Parse([]byte(tt.script))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseAcceptsTextWithToolCalls(t *testing.T) {
	sc, err := llmscript.Parse([]byte(`{"turns":[{"steps":[{"content":"Let me look.","tool_calls":[{"name":"ls","arguments":{}}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if st := sc.Turns[0].Steps[0]; st.Content != "Let me look." || len(st.ToolCalls) != 1 {
		t.Fatalf("step = %+v", st)
	}
	e := newEnvScript(t, sc, llmscript.Options{})
	got, err := e.stream(request(true, user("hi")))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got.content != "Let me look." || len(got.calls) != 1 || got.finish != openai.FinishReasonToolCalls {
		t.Fatalf("streamed content %q, %d calls, finish %q", got.content, len(got.calls), got.finish)
	}
}

func TestValidateScriptBuiltInGo(t *testing.T) {
	s := llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{{}}}}}
	if err := s.Validate(); err == nil {
		t.Error("empty step validated")
	}
	s.Turns[0].Steps[0].Content = "ok"
	if err := s.Validate(); err != nil {
		t.Errorf("valid script: %v", err)
	}
}

func TestArgumentsText(t *testing.T) {
	script := `{"turns":[{"steps":[{"tool_calls":[
	  {"name":"a","arguments":{ "x" : [1, 2] }},
	  {"name":"b"},
	  {"name":"c","arguments":"{\"raw\": broken"},
	  {"name":"d","arguments":42}
	]}]}]}`
	e := newEnv(t, script, llmscript.Options{})
	resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, user("x")))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want := []string{`{"x":[1,2]}`, `{}`, `{"raw": broken`, `42`}
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) != len(want) {
		t.Fatalf("calls = %+v", calls)
	}
	for i, w := range want {
		if calls[i].Function.Arguments != w {
			t.Errorf("call %d arguments = %q, want %q", i, calls[i].Function.Arguments, w)
		}
	}
}

func TestLoadDemoScript(t *testing.T) {
	s, err := llmscript.Load(filepath.Join("..", "testdata", "demo-script.json"))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if s.Model != "scripted" || len(s.Turns) != 2 {
		t.Fatalf("script = %+v", s)
	}
	e := newEnvScript(t, s, llmscript.Options{})
	for msg, command := range map[string]string{
		"Hello there":      "echo hello > /workspace/x && cat /workspace/x",
		"what can you do?": "uname -a; ls -la /workspace",
	} {
		resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, user(msg)))
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		calls := resp.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "execute" ||
			calls[0].Function.Arguments != `{"command":"`+command+`"}` {
			t.Errorf("%q: calls = %+v", msg, calls)
		}
		msgs := []openai.ChatCompletionMessage{user(msg),
			{Role: openai.ChatMessageRoleAssistant, ToolCalls: calls}, toolResult(calls[0].ID, "out")}
		resp, err = e.client.CreateChatCompletion(e.ctx(), request(false, msgs...))
		if err != nil {
			t.Fatalf("%q step 1: %v", msg, err)
		}
		if resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason != openai.FinishReasonStop {
			t.Errorf("%q step 1 = %+v", msg, resp.Choices[0])
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := llmscript.Load(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
}
