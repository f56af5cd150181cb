package hostcheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/hostcheck"
)

// TestHandler: names outside the allowed ones (a rebound page's) get 421
// with an error naming the option; IP literals, localhost, allowed names
// (any case, a trailing dot) and /healthz are served; "*" allows any.
func TestHandler(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := hostcheck.Handler([]string{"Bridge.example.com."}, ok)
	cases := []struct {
		host, path string
		want       int
	}{
		{"attacker.example:7420", "/v1/threads", http.StatusMisdirectedRequest},
		{"bridge.example.com.evil.test", "/v1/ws", http.StatusMisdirectedRequest},
		{"", "/v1/threads", http.StatusMisdirectedRequest},
		{"127.0.0.1:7420", "/v1/threads", http.StatusNoContent},
		{"[::1]:7420", "/v1/threads", http.StatusNoContent},
		{"localhost", "/", http.StatusNoContent},
		{"app.localhost:80", "/", http.StatusNoContent},
		{"BRIDGE.example.com:443", "/v1/threads", http.StatusNoContent},
		{"bridge.example.com.", "/v1/threads", http.StatusNoContent},
		{"lb.internal.example", "/healthz", http.StatusNoContent},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodGet, "http://x"+c.path, nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("Host %q %s: %d, want %d", c.host, c.path, rec.Code, c.want)
		}
		if c.want == http.StatusMisdirectedRequest && !strings.Contains(rec.Body.String(), "--allowed-hosts") {
			t.Errorf("Host %q: body %s does not name the option", c.host, rec.Body)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "http://x/v1/threads", nil)
	req.Host = "anything.example"
	rec := httptest.NewRecorder()
	hostcheck.Handler([]string{"*"}, ok).ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Errorf(`"*": %d`, rec.Code)
	}
}
