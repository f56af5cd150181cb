package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

const testKey = "sk-test-SECRET-123"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func scriptServer(t *testing.T, script llmscript.Script) (*llmscript.Server, *httptest.Server) {
	t.Helper()
	srv := llmscript.New(script, llmscript.Options{APIKey: testKey})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return srv, ts
}

func TestOpenAIStreamsTextToolCallsAndUsage(t *testing.T) {
	script := llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{
		{ToolCalls: []llmscript.ToolCall{
			{ID: "call_a", Name: "read", Arguments: json.RawMessage(`{"path":"a very long path name that will be split.txt"}`)},
			{ID: "call_b", Name: "execute", Arguments: json.RawMessage(`{"command":"echo hi && ls -la /workspace"}`)},
		}},
		{Content: "All done, the files look fine."},
	}}}}
	srv, ts := scriptServer(t, script)
	m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: ts.URL + "/v1", APIKey: testKey, Model: "m1"})

	req := loop.Request{
		Messages: []loop.Message{{Role: loop.RoleSystem, Content: "sys"}, {Role: loop.RoleUser, Content: "go"}},
		Tools:    []loop.ToolDef{{Name: "read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	resp, err := m.Stream(testCtx(t), req, func(string) { t.Error("unexpected text delta") })
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	if c := resp.ToolCalls[0]; c.ID != "call_a" || c.Name != "read" || c.Arguments != `{"path":"a very long path name that will be split.txt"}` {
		t.Fatalf("call 0 %+v", c)
	}
	if c := resp.ToolCalls[1]; c.ID != "call_b" || c.Name != "execute" || c.Arguments != `{"command":"echo hi && ls -la /workspace"}` {
		t.Fatalf("call 1 %+v", c)
	}
	if resp.Usage.TotalTokens == 0 || resp.FinishReason != "tool_calls" {
		t.Fatalf("usage %+v finish %q", resp.Usage, resp.FinishReason)
	}

	// The second step: the history with the tool answers goes back out.
	req.Messages = append(req.Messages,
		loop.Message{Role: loop.RoleAssistant, ToolCalls: resp.ToolCalls},
		loop.Message{Role: loop.RoleTool, ToolCallID: "call_a", Content: "contents"},
		loop.Message{Role: loop.RoleTool, ToolCallID: "call_b", Content: "hi"})
	var deltas []string
	resp, err = m.Stream(testCtx(t), req, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "All done, the files look fine." || strings.Join(deltas, "") != resp.Text || len(deltas) < 2 {
		t.Fatalf("text %q from deltas %q", resp.Text, deltas)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[1].Chat
	if got.Model != "m1" || !got.Stream || got.StreamOptions == nil || !got.StreamOptions.IncludeUsage {
		t.Fatalf("request model %q stream %v options %+v", got.Model, got.Stream, got.StreamOptions)
	}
	if len(got.Tools) != 1 || got.Tools[0].Function.Name != "read" {
		t.Fatalf("tools %+v", got.Tools)
	}
	if n := len(got.Messages); n != 5 || got.Messages[2].ToolCalls[1].ID != "call_b" || got.Messages[4].ToolCallID != "call_b" {
		t.Fatalf("messages %+v", got.Messages)
	}
}

func TestOpenAIOverUnixSocket(t *testing.T) {
	srv := llmscript.New(llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{{Content: "via socket"}}}}}, llmscript.Options{})
	sock := filepath.Join(t.TempDir(), "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Error("server did not stop")
		}
	})

	client := loop.UnixSocketClient(sock)
	defer client.CloseIdleConnections()
	m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: "http://boxwire-llm/v1", HTTPClient: client})
	resp, err := m.Stream(testCtx(t), loop.Request{Messages: []loop.Message{{Role: loop.RoleUser, Content: "x"}}}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "via socket" {
		t.Fatalf("text %q", resp.Text)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("sent Authorization %q without a key", h)
	}
}

func TestOpenAIHTTPErrorIsClearAndKeyless(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		status  int
		want    string
	}{
		{"json error", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"message":"rate limited for key %s","type":"rate_limit"}}`, testKey)
		}, 429, "rate limited for key [redacted]"},
		{"plain error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upstream down", http.StatusBadGateway)
		}, 502, "upstream down"},
		{"error in stream", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n")
		}, 0, "overloaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.handler)
			defer ts.Close()
			m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: ts.URL, APIKey: testKey})
			_, err := m.Stream(testCtx(t), loop.Request{Messages: []loop.Message{{Role: loop.RoleUser, Content: "x"}}}, func(string) {})
			var ee *loop.EndpointError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T), want *EndpointError", err, err)
			}
			if ee.StatusCode != tc.status || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q status %d, want %d and %q", err, ee.StatusCode, tc.status, tc.want)
			}
		})
	}
}

// TestOpenAIMergesOddDeltas feeds hand-written SSE: keep-alive comments,
// a delta without an index, a repeated index with a new id, and a
// usage-only final chunk.
func TestOpenAIMergesOddDeltas(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x1","type":"function","function":{"name":"ls","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"th\":\"/\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x2","type":"function","function":{"name":"read","arguments":"{\"path\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"x3","type":"function","function":{"name":"noargs"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`,
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		var b bytes.Buffer
		for i := 0; i < 400; i++ { // more than go-openai's default empty limit
			b.WriteString(": keep-alive\n")
		}
		for _, c := range chunks {
			fmt.Fprintf(&b, "data: %s\n\n", c)
		}
		b.WriteString("data: [DONE]\n\n")
		_, _ = w.Write(b.Bytes())
	}))
	defer ts.Close()
	m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: ts.URL})
	resp, err := m.Stream(testCtx(t), loop.Request{}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	want := []loop.ToolCall{
		{ID: "x1", Name: "ls", Arguments: `{"path":"/"}`},
		{ID: "x2", Name: "read", Arguments: `{"path":"a"}`},
		{ID: "x3", Name: "noargs", Arguments: `{}`},
	}
	if fmt.Sprint(resp.ToolCalls) != fmt.Sprint(want) {
		t.Fatalf("calls\n got %+v\nwant %+v", resp.ToolCalls, want)
	}
	if resp.Text != "Hi" || resp.Usage != (wire.Usage{PromptTokens: 7, CompletionTokens: 5, TotalTokens: 12}) {
		t.Fatalf("text %q usage %+v", resp.Text, resp.Usage)
	}
}

func TestOpenAIConfigRedactsKey(t *testing.T) {
	cfg := loop.OpenAIConfig{BaseURL: "http://x/v1", APIKey: testKey, Model: "m"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("cfg", "llm", cfg)
	for _, s := range []string{cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), logged.String()} {
		if strings.Contains(s, testKey) || !strings.Contains(s, "http://x/v1") {
			t.Fatalf("leaked or lost: %s", s)
		}
	}
}

// TestLoopWithOpenAI runs a whole turn of the real loop against the
// scripted server.
func TestLoopWithOpenAI(t *testing.T) {
	script := llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{
		{ToolCalls: []llmscript.ToolCall{{Name: "echo", Arguments: json.RawMessage(`{"msg":"hello there"}`)}}},
		{Content: "echoed"},
	}}}}
	srv, ts := scriptServer(t, script)
	l := loop.New(loop.Config{Model: loop.NewOpenAI(loop.OpenAIConfig{BaseURL: ts.URL + "/v1", APIKey: testKey}), Tools: []tools.Tool{echoTool()}})
	conv := &loop.Conversation{}
	rec := &recorder{}
	td := runTurn(t, testCtx(t), l, conv, "echo please", rec)
	if td.Reason != wire.ReasonStop || td.Usage == nil || td.Usage.TotalTokens == 0 {
		t.Fatalf("turn_done %+v", td)
	}
	if res := decode[wire.ToolResult](t, rec.first(t, wire.TypeToolResult)); res.Output != `{"msg":"hello there"}` {
		t.Fatalf("tool result %+v", res)
	}
	checkHistory(t, conv.Messages())
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Chat.Messages[len(reqs[1].Chat.Messages)-1].Role != "tool" {
		t.Fatalf("requests %d", len(reqs))
	}
}

// TestOpenAIStreamCutIsAnError: a stream that stops without a
// finish_reason — cut mid-answer by the scripted server, or ended with
// [DONE] too early — fails as an endpoint error, keeping the text so far;
// it is never taken as a whole answer.
func TestOpenAIStreamCutIsAnError(t *testing.T) {
	_, cut := scriptServer(t, llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{
		{Content: "a sentence that the endpoint cuts off in the middle", CutAfterChunks: 4}}}}})
	early := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer early.Close()
	for name, url := range map[string]string{"cut": cut.URL + "/v1", "done too early": early.URL} {
		m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: url, APIKey: testKey})
		var deltas strings.Builder
		resp, err := m.Stream(testCtx(t), loop.Request{Messages: []loop.Message{{Role: "user", Content: "go"}}},
			func(d string) { deltas.WriteString(d) })
		var ee *loop.EndpointError
		if !errors.As(err, &ee) {
			t.Errorf("%s: err %v, want an endpoint error", name, err)
		}
		if resp.Text == "" || resp.Text != deltas.String() {
			t.Errorf("%s: text %q, deltas %q", name, resp.Text, deltas.String())
		}
	}
}
