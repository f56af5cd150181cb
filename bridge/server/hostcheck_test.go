package server_test

import (
	"net/http"
	"testing"

	"github.com/boxwire/boxwire/bridge/server"
)

// TestHostHeaderChecked: a request naming a host the bridge does not serve
// (what a DNS-rebound page sends, Origin matching) is refused with 421
// before auth or upgrade; IP literals, localhost and the configured names
// are served.
func TestHostHeaderChecked(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.AllowedHosts = []string{"bridge.example.com"} })
	cases := []struct {
		host string
		want int
	}{
		{"attacker.example:7420", http.StatusMisdirectedRequest},
		{"attacker.example", http.StatusMisdirectedRequest},
		{"bridge.example.com.evil.test", http.StatusMisdirectedRequest},
		{"127.0.0.1:7420", http.StatusOK},
		{"[::1]:7420", http.StatusOK},
		{"10.1.2.3", http.StatusOK},
		{"localhost:7420", http.StatusOK},
		{"BRIDGE.example.com:443", http.StatusOK},
		{"bridge.example.com.", http.StatusOK},
	}
	for _, c := range cases {
		for _, upgrade := range []bool{false, true} {
			req, _ := http.NewRequest(http.MethodGet, e.hs.URL+"/v1/threads", nil)
			req.Host = c.host
			req.Header.Set("Authorization", "Bearer "+testToken)
			if upgrade {
				req.URL.Path = "/v1/ws"
				req.Header.Set("Origin", "http://"+c.host)
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%q: %v", c.host, err)
			}
			resp.Body.Close()
			refused := resp.StatusCode == http.StatusMisdirectedRequest
			if refused != (c.want == http.StatusMisdirectedRequest) {
				t.Errorf("Host %q (upgrade %v): status %d, want refused=%v", c.host, upgrade, resp.StatusCode, !refused)
			}
		}
	}
	// /healthz answers any Host.
	req, _ := http.NewRequest(http.MethodGet, e.hs.URL+"/healthz", nil)
	req.Host = "lb.internal.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}
