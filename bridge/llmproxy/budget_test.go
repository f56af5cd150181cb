package llmproxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/llmproxy"
)

// usageUpstream answers chat completions with a fixed usage of 10 tokens,
// streamed (usage in the last chunk, only when asked) or not, and records
// the bodies it received.
type usageUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newUsageUpstream(t *testing.T) *usageUpstream {
	u := &usageUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		u.mu.Lock()
		u.bodies = append(u.bodies, body)
		u.mu.Unlock()
		if body["stream"] != true {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
		if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] == true {
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\r\n\r\n")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *usageUpstream) body(i int) map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[i]
}

type recorder struct {
	mu       sync.Mutex
	reports  []llmproxy.UsageReport
	refusals []llmproxy.Refusal
}

func (r *recorder) usage(u llmproxy.UsageReport) {
	r.mu.Lock()
	r.reports = append(r.reports, u)
	r.mu.Unlock()
}
func (r *recorder) refused(f llmproxy.Refusal) {
	r.mu.Lock()
	r.refusals = append(r.refusals, f)
	r.mu.Unlock()
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTokenModelsAndBudgets(t *testing.T) {
	t.Parallel()
	const streamed = `{"model":"m1","stream":true,"messages":[]}`
	const plain = `{"model":"m1","messages":[]}`
	type call struct {
		token, body string
		status      int
		contains    string
	}
	tests := []struct {
		name     string
		cfg      llmproxy.Config
		calls    []call
		reports  int // usage reports expected
		refusals int
		total    int // tokens counted at the end
	}{
		{"no token", llmproxy.Config{Token: "tok"}, []call{{"", plain, 401, "sandbox token"}}, 0, 0, 0},
		{"wrong token", llmproxy.Config{Token: "tok"}, []call{{"tok2", plain, 401, "sandbox token"}, {"to", plain, 401, "token"}}, 0, 0, 0},
		{"right token", llmproxy.Config{Token: "tok"}, []call{{"tok", plain, 200, "hi"}}, 1, 0, 10},
		{"accept decides", llmproxy.Config{Token: "tok", Accept: func(got string) bool { return got == "rotated" }},
			[]call{{"tok", plain, 401, "sandbox token"}, {"", plain, 401, "sandbox token"}, {"rotated", plain, 200, "hi"}}, 1, 0, 10},
		{"model refused", llmproxy.Config{Models: []string{"m2"}}, []call{{"", plain, 403, "not allowed"}}, 0, 1, 0},
		{"model allowed", llmproxy.Config{Models: []string{"m0", "m1"}}, []call{{"", streamed, 200, "[DONE]"}}, 1, 0, 10},
		{"requests per minute", llmproxy.Config{RequestsPerMinute: 2}, []call{
			{"", plain, 200, "hi"}, {"", streamed, 200, "hi"}, {"", plain, 429, "per minute"}}, 2, 1, 20},
		{"token budget", llmproxy.Config{TokenBudget: 15}, []call{
			{"", plain, 200, "hi"}, {"", streamed, 200, "hi"}, {"", plain, 429, "budget_exceeded"}}, 2, 1, 20},
		{"bad body", llmproxy.Config{}, []call{{"", "not json", 400, "not a chat completion"}}, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newUsageUpstream(t)
			var rec recorder
			cfg := tc.cfg
			cfg.Upstream, cfg.APIKey = up.URL+"/v1", testKey
			cfg.OnUsage, cfg.OnRefused = rec.usage, rec.refused
			cfg.Logger = slog.New(slog.DiscardHandler)
			p, err := llmproxy.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(p)
			defer front.Close()
			for i, c := range tc.calls {
				status, body := post(t, front.URL, c.token, c.body)
				if status != c.status || !strings.Contains(body, c.contains) {
					t.Fatalf("call %d: %d %s, want %d containing %q", i, status, body, c.status, c.contains)
				}
				if strings.Contains(body, testKey) {
					t.Fatalf("key in answer: %s", body)
				}
			}
			total, _ := p.Totals()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.reports) != tc.reports || len(rec.refusals) != tc.refusals || total.TotalTokens != tc.total {
				t.Fatalf("reports %d refusals %d total %d, want %d %d %d",
					len(rec.reports), len(rec.refusals), total.TotalTokens, tc.reports, tc.refusals, tc.total)
			}
			if n := len(rec.reports); n > 0 && rec.reports[n-1].Total.TotalTokens != tc.total {
				t.Fatalf("last report %+v", rec.reports[n-1])
			}
		})
	}
}

func TestStreamingForcesIncludeUsage(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{`{"model":"m","stream":true}`, "true"},
		{`{"model":"m","stream":true,"stream_options":null}`, "true"},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false}}`, "true"},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, "true"},
		{`{"model":"m"}`, "<nil>"},
	}
	for _, tc := range tests {
		up := newUsageUpstream(t)
		p, err := llmproxy.New(llmproxy.Config{Upstream: up.URL + "/v1", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(p)
		if status, body := post(t, front.URL, "", tc.body); status != 200 {
			t.Fatalf("%s: %d %s", tc.body, status, body)
		}
		front.Close()
		opts, _ := up.body(0)["stream_options"].(map[string]any)
		if got := fmt.Sprint(opts["include_usage"]); got != tc.want {
			t.Errorf("%s: upstream saw include_usage %s, want %s", tc.body, got, tc.want)
		}
		if total, n := p.Totals(); total.TotalTokens != 10 || n != 1 {
			t.Errorf("%s: counted %d tokens in %d calls", tc.body, total.TotalTokens, n)
		}
	}
}
