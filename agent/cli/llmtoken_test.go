package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyStandIn answers 200 with the request's body to a call that carries
// "Bearer good" and 401 to every other, and records the tokens it saw.
type proxyStandIn struct {
	mu   sync.Mutex
	seen []string
}

func (p *proxyStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Header.Get("Authorization"))
	p.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer good" {
		http.Error(w, `{"error":{"message":"missing or wrong sandbox token"}}`, http.StatusUnauthorized)
		return
	}
	_, _ = io.Copy(w, r.Body)
}

func (p *proxyStandIn) tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func post(t *testing.T, c *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return resp.StatusCode, string(b)
}

// A model call refused for a stale token (a restarted bridge's proxy
// before its claim reached the agent) is sent again, body and all, once
// the claim brings the new token.
func TestLLMTokenRefusedCallWaitsForTheNextClaim(t *testing.T) {
	t.Parallel()
	p := &proxyStandIn{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	tok := &llmToken{}
	tok.set("stale")
	c := tok.client(&http.Client{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		tok.set("good")
	}()
	code, body := post(t, c, srv.URL, `{"model":"m"}`)
	if code != http.StatusOK || body != `{"model":"m"}` {
		t.Fatalf("answer %d %q, want 200 with the body sent again", code, body)
	}
	if got := p.tokens(); len(got) != 2 || got[0] != "Bearer stale" || got[1] != "Bearer good" {
		t.Fatalf("the proxy saw %q, want the stale token then the new one", got)
	}
}

// A refusal with no new token to try within the wait is passed on as it
// came, body and all; a good token is sent once.
func TestLLMTokenRefusalWithoutANewTokenIsPassedOn(t *testing.T) {
	t.Parallel()
	p := &proxyStandIn{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	tok := &llmToken{wait: 50 * time.Millisecond}
	tok.set("stale")
	c := tok.client(&http.Client{})
	code, body := post(t, c, srv.URL, `{}`)
	if code != http.StatusUnauthorized || !strings.Contains(body, "wrong sandbox token") {
		t.Fatalf("answer %d %q, want the proxy's 401", code, body)
	}
	if n := len(p.tokens()); n != 1 {
		t.Fatalf("the proxy saw %d calls, want 1", n)
	}
	tok.set("good")
	if code, _ := post(t, c, srv.URL, `{}`); code != http.StatusOK {
		t.Fatalf("with the good token: %d", code)
	}
	if n := len(p.tokens()); n != 2 {
		t.Fatalf("the proxy saw %d calls, want 2", n)
	}
}
