package llmscript_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/boxwire/boxwire/e2e/llmscript"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// env is one scripted server behind httptest and a real go-openai client.
type env struct {
	t      *testing.T
	srv    *llmscript.Server
	http   *httptest.Server
	client *openai.Client
}

// newEnv parses script, serves it and returns a client for it. Everything
// is closed when the test ends.
func newEnv(t *testing.T, script string, opts llmscript.Options) *env {
	t.Helper()
	s, err := llmscript.Parse([]byte(script))
	if err != nil {
		t.Fatalf("parse script: %v", err)
	}
	return newEnvScript(t, s, opts)
}

// newEnvScript is newEnv for a script already parsed.
func newEnvScript(t *testing.T, s llmscript.Script, opts llmscript.Options) *env {
	t.Helper()
	srv := llmscript.New(s, opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	key := opts.APIKey
	if key == "" {
		key = "unused"
	}
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = hs.URL + "/v1"
	cfg.HTTPClient = hs.Client()
	return &env{t: t, srv: srv, http: hs, client: openai.NewClientWithConfig(cfg)}
}

// do sends method to path of the server with body and returns the
// answer, whose body the test's end closes.
func (e *env) do(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx(), method, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// ctx returns a context that ends after testTimeout or with the test.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// request builds a chat request from alternating role/content pairs.
func request(stream bool, msgs ...openai.ChatCompletionMessage) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{Model: "scripted", Messages: msgs, Stream: stream}
}

func user(text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}
}

func assistant(text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: text}
}

func toolResult(id, text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: id, Content: text}
}

// streamed is a whole stream merged the way an agent must merge it.
type streamed struct {
	chunks   []openai.ChatCompletionStreamResponse
	content  string
	calls    []openai.ToolCall
	finish   openai.FinishReason
	usage    *openai.Usage
	contentN int // chunks that carried text
}

// stream runs req as a stream and merges it; tool calls merge by index.
// It is safe to call from any goroutine.
func (e *env) stream(req openai.ChatCompletionRequest) (streamed, error) {
	st, err := e.client.CreateChatCompletionStream(e.ctx(), req)
	if err != nil {
		return streamed{}, err
	}
	defer st.Close()
	var out streamed
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.chunks = append(out.chunks, c)
		if c.Usage != nil {
			out.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				out.content += ch.Delta.Content
				out.contentN++
			}
			for _, d := range ch.Delta.ToolCalls {
				if out.calls, err = mergeCall(out.calls, d); err != nil {
					return out, err
				}
			}
			if ch.FinishReason != "" {
				out.finish = ch.FinishReason
			}
		}
	}
}

// mergeCall adds one tool-call delta: a new index opens a call with its
// id, type and name; later deltas may only append argument text.
func mergeCall(calls []openai.ToolCall, d openai.ToolCall) ([]openai.ToolCall, error) {
	if d.Index == nil {
		return calls, fmt.Errorf("tool-call delta without index: %+v", d)
	}
	i := *d.Index
	switch {
	case i == len(calls):
		return append(calls, openai.ToolCall{ID: d.ID, Type: d.Type, Function: d.Function}), nil
	case i > len(calls):
		return calls, fmt.Errorf("tool-call delta index %d skips past %d open calls", i, len(calls))
	case d.ID != "" || d.Function.Name != "":
		return calls, fmt.Errorf("later delta for call %d repeats id/name: %+v", i, d)
	}
	calls[i].Function.Arguments += d.Function.Arguments
	return calls, nil
}
