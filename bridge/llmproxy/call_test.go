package llmproxy_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/llmproxy"
)

// TestOnCall: every chat completion answered is reported once, after its
// answer, with its outcome and the usage the upstream gave (also when it
// came in the last chunk of a stream); GET /v1/models is no call.
func TestOnCall(t *testing.T) {
	t.Parallel()
	up := newUsageUpstream(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // mid-stream, as an endpoint that dies
		}
	}))
	t.Cleanup(cut.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	usage := llmproxy.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}
	tests := []struct {
		name, upstream, body string
		models               []string
		want                 llmproxy.Call
	}{
		{"plain", up.URL, `{"model":"m1","messages":[]}`, nil,
			llmproxy.Call{Model: "m1", Outcome: llmproxy.OutcomeOK, Usage: usage, HasUsage: true}},
		{"streamed", up.URL, `{"model":"m1","stream":true,"messages":[]}`, nil,
			llmproxy.Call{Model: "m1", Stream: true, Outcome: llmproxy.OutcomeOK, Usage: usage, HasUsage: true}},
		{"model refused", up.URL, `{"model":"m9","messages":[]}`, []string{"m1"},
			llmproxy.Call{Model: "m9", Outcome: llmproxy.OutcomeRefused}},
		{"bad body", up.URL, `not json`, nil, llmproxy.Call{Outcome: llmproxy.OutcomeRefused}},
		{"upstream error", failing.URL, `{"model":"m1","messages":[]}`, nil,
			llmproxy.Call{Model: "m1", Outcome: llmproxy.OutcomeError}},
		{"cut", cut.URL, `{"model":"m1","stream":true,"messages":[]}`, nil,
			llmproxy.Call{Model: "m1", Stream: true, Outcome: llmproxy.OutcomeCut}},
		{"unreachable", gone.URL, `{"model":"m1","messages":[]}`, nil,
			llmproxy.Call{Model: "m1", Outcome: llmproxy.OutcomeUnreachable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				calls []llmproxy.Call
			)
			p, err := llmproxy.New(llmproxy.Config{Upstream: tc.upstream + "/v1", APIKey: testKey, Models: tc.models,
				Logger: slog.New(slog.DiscardHandler), OnCall: func(c llmproxy.Call) {
					mu.Lock()
					calls = append(calls, c)
					mu.Unlock()
				}})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(p)
			defer front.Close()
			post(t, front.URL, "", tc.body)
			if resp, err := http.Get(front.URL + "/v1/models"); err == nil {
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 1 {
				t.Fatalf("%d calls reported, want 1: %+v", len(calls), calls)
			}
			got := calls[0]
			if got.Duration <= 0 {
				t.Errorf("duration %v", got.Duration)
			}
			got.Duration = 0
			if got != tc.want {
				t.Errorf("reported %+v, want %+v", got, tc.want)
			}
		})
	}
}
