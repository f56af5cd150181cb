package llmscript_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/boxwire/boxwire/e2e/llmscript"
)

func TestNonStreaming(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, user("files?")))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %d", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.FinishReason != openai.FinishReasonToolCalls || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice = %+v", ch)
	}
	c := ch.Message.ToolCalls[0]
	if c.ID != "call_0_0_0" || c.Type != openai.ToolTypeFunction || c.Function.Name != "execute" ||
		c.Function.Arguments != `{"command":"echo hello > /workspace/x && cat /workspace/x"}` {
		t.Errorf("call = %+v", c)
	}
	if resp.Object != "chat.completion" || resp.Model != "scripted" || resp.Usage.TotalTokens < 2 {
		t.Errorf("response = %+v", resp)
	}

	resp, err = e.client.CreateChatCompletion(e.ctx(), request(false,
		user("files?"),
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: ch.Message.ToolCalls},
		toolResult("call_0_0_0", "hello"), toolResult("my_id", "x")))
	if err != nil {
		t.Fatalf("create step 1: %v", err)
	}
	if got := resp.Choices[0]; got.Message.Content != "The file says hello." || got.FinishReason != openai.FinishReasonStop {
		t.Errorf("step 1 = %+v", got)
	}
}

func TestTurnAndStepSelection(t *testing.T) {
	script := `{"turns":[
	  {"when":"Weather","steps":[{"content":"w0"},{"content":"w1"},{"content":"w2"}]},
	  {"when":"time","steps":[{"content":"t0"}]},
	  {"steps":[{"content":"default"}]}
	]}`
	e := newEnv(t, script, llmscript.Options{})
	tests := []struct {
		name string
		msgs []openai.ChatCompletionMessage
		want string
	}{
		{"case-insensitive substring", []openai.ChatCompletionMessage{user("how is the WEATHER today")}, "w0"},
		{"second turn", []openai.ChatCompletionMessage{user("what time is it")}, "t0"},
		{"first matching turn wins", []openai.ChatCompletionMessage{user("weather at this time")}, "w0"},
		{"empty when matches anything", []openai.ChatCompletionMessage{user("hmm")}, "default"},
		{"last user message decides", []openai.ChatCompletionMessage{
			user("weather"), assistant("w0"), user("and the time?")}, "t0"},
		{"step by assistants after last user", []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
			user("time"), assistant("t0"), user("weather"), assistant("a"), toolResult("c", "r"), assistant("b")}, "w2"},
		{"past the last step", []openai.ChatCompletionMessage{
			user("weather"), assistant("a"), assistant("b"), assistant("c")}, "(script: no more steps)"},
		{"multi-part user content", []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser,
			MultiContent: []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "the weather"}}}}, "w0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				var got string
				if stream {
					s, err := e.stream(request(true, tt.msgs...))
					if err != nil {
						t.Fatalf("stream: %v", err)
					}
					got = s.content
				} else {
					resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, tt.msgs...))
					if err != nil {
						t.Fatalf("create: %v", err)
					}
					got = resp.Choices[0].Message.Content
				}
				if got != tt.want {
					t.Errorf("stream=%v: got %q, want %q", stream, got, tt.want)
				}
			}
		})
	}
}

func TestNoTurnMatches(t *testing.T) {
	e := newEnv(t, `{"turns":[{"when":"x","steps":[{"content":"x"}]}]}`, llmscript.Options{})
	resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, user("nothing here")))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := resp.Choices[0].Message.Content; !strings.HasPrefix(got, "(script: no turn matches") {
		t.Errorf("content = %q", got)
	}
}

func TestErrorSteps(t *testing.T) {
	script := `{"turns":[
	  {"when":"limit","steps":[{"error":{"status":429,"message":"slow down","code":"rate_limit_exceeded"}}]},
	  {"when":"boom","steps":[{"error":{"status":503,"message":"overloaded","type":"overloaded_error"}}]}
	]}`
	e := newEnv(t, script, llmscript.Options{})
	tests := []struct {
		msg, message, typ string
		status            int
		code              any
	}{
		{"limit", "slow down", "rate_limit_error", 429, "rate_limit_exceeded"},
		{"boom", "overloaded", "overloaded_error", 503, nil},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.msg, stream), func(t *testing.T) {
				var err error
				if stream {
					_, err = e.stream(request(true, user(tt.msg)))
				} else {
					_, err = e.client.CreateChatCompletion(e.ctx(), request(false, user(tt.msg)))
				}
				var apiErr *openai.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v (%T), want *openai.APIError", err, err)
				}
				if apiErr.HTTPStatusCode != tt.status || apiErr.Message != tt.message || apiErr.Type != tt.typ {
					t.Errorf("api error = %+v", apiErr)
				}
				if tt.code != nil && apiErr.Code != tt.code {
					t.Errorf("code = %v, want %v", apiErr.Code, tt.code)
				}
			})
		}
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{APIKey: "sk-right"})
	if _, err := e.client.CreateChatCompletion(e.ctx(), request(false, user("hi"))); err != nil {
		t.Fatalf("with the key: %v", err)
	}
	cfg := openai.DefaultConfig("sk-wrong")
	cfg.BaseURL = e.http.URL + "/v1"
	cfg.HTTPClient = e.http.Client()
	wrong := openai.NewClientWithConfig(cfg)
	for name, call := range map[string]func() error{
		"chat": func() error { _, err := wrong.CreateChatCompletion(e.ctx(), request(false, user("hi"))); return err },
		"stream": func() error {
			_, err := wrong.CreateChatCompletionStream(e.ctx(), request(true, user("hi")))
			return err
		},
		"models": func() error { _, err := wrong.ListModels(e.ctx()); return err },
	} {
		var apiErr *openai.APIError
		if err := call(); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong key: err = %v, want 401 APIError", name, err)
		} else if apiErr.Code != "invalid_api_key" || strings.Contains(apiErr.Message, "sk-") {
			t.Errorf("%s: api error = %+v", name, apiErr)
		}
	}
	reqs := e.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("recorded %d requests, want 4", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-right" {
		t.Errorf("first request's Authorization = %q", got)
	}
}

func TestModels(t *testing.T) {
	e := newEnv(t, `{"model":"my-model","turns":[{"steps":[{"content":"x"}]}]}`, llmscript.Options{})
	list, err := e.client.ListModels(e.ctx())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Models) != 1 || list.Models[0].ID != "my-model" || list.Models[0].Object != "model" {
		t.Errorf("models = %+v", list.Models)
	}
	m, err := e.client.GetModel(e.ctx(), "my-model")
	if err != nil || m.ID != "my-model" {
		t.Errorf("get model = %+v, %v", m, err)
	}
	var apiErr *openai.APIError
	if _, err := e.client.GetModel(e.ctx(), "other"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 {
		t.Errorf("get unknown model: %v", err)
	}
}

func TestRecordingAndReset(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	req := request(false, user("hi"))
	req.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "execute"}}}
	if _, err := e.client.CreateChatCompletion(e.ctx(), req); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := e.stream(request(true, user("files"))); err != nil {
		t.Fatalf("stream: %v", err)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	r0, r1 := reqs[0], reqs[1]
	if r0.Method != http.MethodPost || r0.Path != "/v1/chat/completions" || r0.Chat.Stream ||
		len(r0.Chat.Tools) != 1 || r0.Chat.Tools[0].Function.Name != "execute" || r0.Chat.Messages[0].Content != "hi" {
		t.Errorf("first request = %+v", r0)
	}
	if !r1.Chat.Stream || r1.Chat.Messages[0].Content != "files" || !strings.Contains(string(r1.Body), `"stream":true`) {
		t.Errorf("second request = %+v", r1)
	}
	if r0.Header.Get("Authorization") != "Bearer unused" {
		t.Errorf("headers = %v", r0.Header)
	}
	e.srv.Reset()
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("after Reset: %d requests", n)
	}
}

func TestDelayEndsWithRequest(t *testing.T) {
	e := newEnv(t, `{"turns":[{"steps":[{"content":"late","delay_ms":60000}]}]}`, llmscript.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.client.CreateChatCompletion(ctx, request(false, user("hi")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > testTimeout {
		t.Errorf("took %v", d)
	}
	// httptest's Close (in cleanup) blocks until the handler returns: a
	// handler stuck in the delay would hang the test here.
}

func TestConcurrentConversations(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Go(func() {
			errs <- conversation(e, i)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(e.srv.Requests()); n != workers*2 {
		t.Errorf("recorded %d requests, want %d", n, workers*2)
	}
}

// conversation runs one two-step tool conversation, streaming on odd i.
func conversation(e *env, i int) error {
	msgs := []openai.ChatCompletionMessage{user(fmt.Sprintf("files #%d", i))}
	first, err := e.client.CreateChatCompletion(e.ctx(), request(false, msgs...))
	if err != nil {
		return fmt.Errorf("worker %d step 0: %w", i, err)
	}
	calls := first.Choices[0].Message.ToolCalls
	if len(calls) != 2 {
		return fmt.Errorf("worker %d: %d calls", i, len(calls))
	}
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: calls},
		toolResult(calls[0].ID, "hello"), toolResult(calls[1].ID, "x"))
	var text string
	if i%2 == 1 {
		s, err := e.stream(request(true, msgs...))
		if err != nil {
			return fmt.Errorf("worker %d step 1: %w", i, err)
		}
		text = s.content
	} else {
		resp, err := e.client.CreateChatCompletion(e.ctx(), request(false, msgs...))
		if err != nil {
			return fmt.Errorf("worker %d step 1: %w", i, err)
		}
		text = resp.Choices[0].Message.Content
	}
	if text != "The file says hello." {
		return fmt.Errorf("worker %d: text %q", i, text)
	}
	return nil
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, toolScript, llmscript.Options{})
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"invalid json", http.MethodPost, "/v1/chat/completions", `{"messages":`, http.StatusBadRequest},
		{"no messages", http.MethodPost, "/v1/chat/completions", `{"model":"scripted","messages":[]}`, http.StatusBadRequest},
		{"wrong method", http.MethodGet, "/v1/chat/completions", ``, http.StatusMethodNotAllowed},
		{"unknown path", http.MethodPost, "/v1/embeddings", `{}`, http.StatusNotFound},
		{"models without prefix", http.MethodGet, "/models", ``, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(t, tt.method, tt.path, tt.body)
			var body struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("decode body: %v", err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if gotErr := body.Error != nil; gotErr != (tt.status != http.StatusOK) {
				t.Errorf("error body = %+v for status %d", body.Error, resp.StatusCode)
			} else if gotErr && (body.Error.Message == "" || body.Error.Type == "") {
				t.Errorf("error body = %+v", body.Error)
			}
		})
	}
}
