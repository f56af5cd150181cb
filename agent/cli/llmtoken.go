package cli

import (
	"net/http"
	"sync/atomic"
)

// llmToken is the sandbox's LLM proxy token, which the bridge's claim
// brings (docs/pool.md; older bridges set BOXWIRE_LLM_TOKEN). It is safe
// for concurrent use.
type llmToken struct {
	v    atomic.Pointer[string]
	next http.RoundTripper
}

// set replaces the token; "" sends none.
func (t *llmToken) set(tok string) { t.v.Store(&tok) }

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

// RoundTrip adds "Authorization: Bearer <token>" when a token is set.
func (t *llmToken) RoundTrip(req *http.Request) (*http.Response, error) {
	if p := t.v.Load(); p != nil && *p != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+*p)
	}
	return t.next.RoundTrip(req)
}
