package llmscript_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/boxwire/boxwire/e2e/llmscript"
)

const toolScript = `{"turns":[
  {"when":"files","steps":[
    {"tool_calls":[
      {"name":"execute","arguments":{"command":"echo hello > /workspace/x && cat /workspace/x"}},
      {"id":"my_id","name":"read","arguments":{"path":"/workspace/ünïcode.txt"}}
    ]},
    {"content":"The file says hello."}
  ]},
  {"steps":[{"content":"I only know scripted answers, and this sentence is long enough to need many chunks."}]}
]}`

func TestStreamTextReassembles(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	got, err := e.stream(request(true, user("what is up?")))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	want := "I only know scripted answers, and this sentence is long enough to need many chunks."
	if got.content != want {
		t.Errorf("content = %q, want %q", got.content, want)
	}
	if got.contentN < 5 {
		t.Errorf("text came in %d chunks, want several", got.contentN)
	}
	if got.finish != openai.FinishReasonStop {
		t.Errorf("finish = %q, want stop", got.finish)
	}
	if got.chunks[0].Choices[0].Delta.Role != openai.ChatMessageRoleAssistant {
		t.Errorf("first chunk role = %q, want assistant", got.chunks[0].Choices[0].Delta.Role)
	}
	if got.usage != nil {
		t.Errorf("usage sent without include_usage: %+v", got.usage)
	}
	for _, c := range got.chunks {
		if c.Object != "chat.completion.chunk" || c.ID == "" || c.ID != got.chunks[0].ID {
			t.Errorf("chunk object/id = %q/%q", c.Object, c.ID)
		}
	}
}

func TestStreamToolCallDeltas(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	got, err := e.stream(request(true, user("list the FILES please")))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got.finish != openai.FinishReasonToolCalls {
		t.Fatalf("finish = %q, want tool_calls", got.finish)
	}
	if len(got.calls) != 2 {
		t.Fatalf("got %d calls, want 2: %+v", len(got.calls), got.calls)
	}
	want := []struct{ id, name, args string }{
		{"call_0_0_0", "execute", `{"command":"echo hello > /workspace/x && cat /workspace/x"}`},
		{"my_id", "read", `{"path":"/workspace/ünïcode.txt"}`},
	}
	for i, w := range want {
		c := got.calls[i]
		if c.ID != w.id || c.Type != openai.ToolTypeFunction || c.Function.Name != w.name || c.Function.Arguments != w.args {
			t.Errorf("call %d = %+v, want id %q name %q args %s", i, c, w.id, w.name, w.args)
		}
	}
	// The arguments really arrive split: count the argument-only deltas.
	pieces := map[int]int{}
	for _, c := range got.chunks {
		for _, ch := range c.Choices {
			for _, d := range ch.Delta.ToolCalls {
				if d.Function.Name == "" && d.Function.Arguments != "" {
					pieces[*d.Index]++
				}
			}
		}
	}
	if pieces[0] < 3 || pieces[1] < 2 {
		t.Errorf("argument pieces per call = %v, want several each", pieces)
	}
}

func TestStreamIncludeUsage(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	req := request(true, user("hi"))
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	got, err := e.stream(req)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	last := got.chunks[len(got.chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil {
		t.Fatalf("last chunk = %+v, want usage and no choices", last)
	}
	for _, c := range got.chunks[:len(got.chunks)-1] {
		if c.Usage != nil || len(c.Choices) != 1 {
			t.Errorf("earlier chunk has usage or %d choices: %+v", len(c.Choices), c)
		}
	}
	u := last.Usage
	if u.PromptTokens < 1 || u.CompletionTokens < 10 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v", u)
	}
}

// TestStreamWireFormat reads the raw SSE to check what clients other than
// go-openai rely on.
func TestStreamWireFormat(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	body := `{"model":"scripted","stream":true,"messages":[{"role":"user","content":"files"}]}`
	resp := e.do(t, http.MethodPost, "/chat/completions", body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type = %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line without data prefix: %q", line)
		}
		events = append(events, data)
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events = %q, want chunks then [DONE]", events)
	}
	var laterTypes int
	for _, ev := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					ToolCalls []map[string]json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev, err)
		}
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			if _, hasID := tc["id"]; !hasID {
				if _, hasType := tc["type"]; hasType {
					laterTypes++
				}
			}
		}
	}
	if laterTypes != 0 {
		t.Errorf("%d later tool-call deltas carry a type field", laterTypes)
	}
}

func TestStreamChunkDelay(t *testing.T) {
	e := newEnv(t, `{"turns":[{"steps":[{"content":"slow words arriving one at a time","chunk_delay_ms":20}]}]}`, llmscript.Options{})
	start := time.Now()
	got, err := e.stream(request(true, user("go")))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	// role + 6 text pieces + finish + [DONE] = 8 pauses at least.
	if d := time.Since(start); d < 8*20*time.Millisecond {
		t.Errorf("stream took %v, want the chunk delays honoured", d)
	}
	if got.content != "slow words arriving one at a time" {
		t.Errorf("content = %q", got.content)
	}
}

// TestCompletionWireFormat checks the raw non-streaming body: "content" is
// null beside tool calls, no Azure-only fields, no HTML escaping.
func TestCompletionWireFormat(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	body := `{"model":"scripted","messages":[{"role":"user","content":"files"}]}`
	resp := e.do(t, http.MethodPost, "/v1/chat/completions", body)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`"content":null`, `"finish_reason":"tool_calls"`, `echo hello > /workspace/x && cat`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("body lacks %s: %s", want, raw)
		}
	}
	if strings.Contains(string(raw), "content_filter") {
		t.Errorf("body has Azure-only fields: %s", raw)
	}
}

// TestStreamCutAfterChunks: a step with cut_after_chunks breaks the
// stream off mid-response; the client gets some text, then an error, never
// a finished answer.
func TestStreamCutAfterChunks(t *testing.T) {
	e := newEnv(t, `{"turns":[{"steps":[{"content":"a story that breaks off in the middle","cut_after_chunks":3}]}]}`, llmscript.Options{})
	got, err := e.stream(request(true, user("go")))
	if err == nil {
		t.Fatalf("stream ended cleanly with %q; want it cut", got.content)
	}
	if got.content == "" || got.content == "a story that breaks off in the middle" {
		t.Errorf("content before the cut = %q; want part of the story", got.content)
	}
}
