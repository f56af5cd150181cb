package cli

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// staleTokenWait bounds how long a model call the proxy refused (401)
// waits for the bridge's next claim before the refusal is passed on.
const staleTokenWait = 15 * time.Second

// maxRefusalBody caps how much of a refusal's body is kept while waiting.
const maxRefusalBody = 64 << 10

// llmToken is the sandbox's LLM proxy token, which the bridge's claim
// brings (docs/pool.md; older bridges set BOXWIRE_LLM_TOKEN). It is safe
// for concurrent use.
//
// A restarted bridge accepts none of the tokens its predecessor issued: it
// starts the adopted sandbox's tokens anew and hands the new one over when
// it greets the agent. A model call the agent retries across the restart
// can reach the new bridge's proxy before that greeting and be refused, so
// a refused call waits, for at most wait, for the token to change and is
// then sent again with the new one; a refusal with no new token to try is
// passed on as it came.
type llmToken struct {
	mu      sync.Mutex
	tok     string
	changed chan struct{} // closed when tok is replaced
	next    http.RoundTripper
	wait    time.Duration // staleTokenWait when zero
	log     *slog.Logger  // nil: no log
}

// set replaces the token; "" sends none.
func (t *llmToken) set(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tok = tok
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// current returns the token and a channel closed when it is replaced.
func (t *llmToken) current() (string, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.tok, t.changed
}

// client wraps c so that every request carries the current token.
func (t *llmToken) client(c *http.Client) *http.Client {
	t.next = c.Transport
	if t.next == nil {
		t.next = http.DefaultTransport
	}
	out := *c
	out.Transport = t
	return &out
}

// RoundTrip adds "Authorization: Bearer <token>" when a token is set, and
// sends a request the proxy refused again once the token changed (see
// llmToken).
func (t *llmToken) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, changed := t.current()
	resp, err := t.next.RoundTrip(withToken(req, tok))
	deadline := time.Now().Add(t.waitFor())
	for err == nil && resp.StatusCode == http.StatusUnauthorized && (req.Body == nil || req.GetBody != nil) {
		keep(resp)
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
			timer.Stop()
		case <-timer.C:
			return resp, nil
		case <-req.Context().Done():
			timer.Stop()
			return resp, nil
		}
		again := req.Clone(req.Context())
		if req.Body != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return resp, nil
			}
			again.Body = body
		}
		tok, changed = t.current()
		if t.log != nil {
			t.log.Warn("model call refused for a stale proxy token; sending it again with the new one", "path", req.URL.Path)
		}
		resp, err = t.next.RoundTrip(withToken(again, tok))
	}
	return resp, err
}

func (t *llmToken) waitFor() time.Duration {
	if t.wait > 0 {
		return t.wait
	}
	return staleTokenWait
}

// withToken returns req carrying tok as its bearer token ("" adds none).
func withToken(req *http.Request, tok string) *http.Request {
	if tok == "" {
		return req
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// keep reads resp's body (up to maxRefusalBody) into memory and closes the
// connection's, so that waiting holds no connection and the refusal can
// still be passed on whole.
func keep(resp *http.Response) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
}
