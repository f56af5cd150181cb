package llmproxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/llmproxy"
)

// TestRedactForModel: the secrets RedactForModel masks are taken out of
// tool messages before the request goes upstream, each changed message
// tells the model how many, and everything else goes as the agent sent it.
func TestRedactForModel(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"total_tokens":3}}`)
	}))
	t.Cleanup(up.Close)
	p, err := llmproxy.New(llmproxy.Config{Upstream: up.URL + "/v1", RedactForModel: func(s string) (string, int) {
		n := strings.Count(s, "hunter2-secret")
		return strings.ReplaceAll(s, "hunter2-secret", "[REDACTED]"), n
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	req := `{"model":"m","messages":[
		{"role":"user","content":"print hunter2-secret"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"execute","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"key=hunter2-secret and hunter2-secret"},
		{"role":"tool","tool_call_id":"c2","content":"nothing here"}]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("upstream got %d requests", len(bodies))
	}
	var got struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Messages[2].Content; strings.Contains(c, "hunter2") || !strings.HasPrefix(c, "key=[REDACTED] and [REDACTED]\n[boxwire: 2 secret(s)") {
		t.Errorf("the tool message upstream: %q", c)
	}
	if got.Messages[3].Content != "nothing here" || got.Messages[0].Content != "print hunter2-secret" {
		t.Errorf("other messages changed: %+v", got.Messages)
	}
}

// TestRedactCallersToken: the sandbox token a call came with is masked in
// its tool messages like any secret the bridge holds, with no
// RedactForModel set.
func TestRedactCallersToken(t *testing.T) {
	const token = "sbx-0123456789abcdef0123456789abcdef"
	bodies := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	}))
	t.Cleanup(up.Close)
	p, err := llmproxy.New(llmproxy.Config{Upstream: up.URL + "/v1", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[
		{"role":"tool","tool_call_id":"c1","content":"found `+token+` in memory"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal([]byte(<-bodies), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Messages[0].Content; strings.Contains(c, token) || !strings.HasPrefix(c, "found [REDACTED] in memory\n[boxwire: 1 secret(s)") {
		t.Errorf("the tool message upstream: %q", c)
	}
}
