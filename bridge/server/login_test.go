package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/web"
	"github.com/boxwire/boxwire/bridge/wire"
)

// browser is a test's web page: requests carry its session cookie (as a
// browser's would) and, when csrf is set, the CSRF header.
type browser struct {
	e      *env
	cookie *http.Cookie
	csrf   string
}

// do sends a request with the browser's cookie and returns the response
// (body read and closed).
func (b *browser) do(method, path, body string, hdr http.Header) (*http.Response, string) {
	b.e.t.Helper()
	req, err := http.NewRequest(method, b.e.hs.URL+path, strings.NewReader(body))
	if err != nil {
		b.e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// login posts key to /v1/login and keeps the cookie and CSRF token.
func (e *env) login(key string) *browser {
	e.t.Helper()
	b := &browser{e: e}
	resp, body := b.do("POST", "/v1/login", `{"key":"`+key+`"}`, http.Header{"Content-Type": {"application/json"}})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == web.SessionCookie {
			b.cookie = c
		}
	}
	var info struct {
		User, CSRF string
	}
	if b.cookie == nil || json.Unmarshal([]byte(body), &info) != nil || info.CSRF == "" {
		e.t.Fatalf("login: no cookie or csrf: %v %s", resp.Header, body)
	}
	b.csrf = info.CSRF
	return b
}

// adminJSON calls the admin API with the bearer token and decodes into out.
func (e *env) adminJSON(method, path, body string, out any) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.hs.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// userKey adds user and returns a key of theirs and its id.
func (e *env) userKey(user string) (key, id string) {
	e.t.Helper()
	e.adminJSON("POST", "/v1/users", `{"name":"`+user+`"}`, nil)
	var k struct {
		Key    string
		Stored struct{ ID string }
	}
	e.adminJSON("POST", "/v1/users/"+user+"/keys", `{"name":"web"}`, &k)
	return k.Key, k.Stored.ID
}

var jsonCSRF = func(csrf string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, web.CSRFHeader: {csrf}}
}

// TestLoginSession: a key buys an HttpOnly, SameSite=Strict cookie (not
// Secure over plain HTTP) that authenticates reads; a state change needs
// the CSRF token as well; GET /v1/login repeats it; logout ends the
// session.
func TestLoginSession(t *testing.T) {
	e := newEnv(t)
	key, _ := e.userKey("alice")
	b := e.login(key)
	c := b.cookie
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge <= 0 {
		t.Fatalf("cookie attributes: %+v", c)
	}
	if strings.Contains(c.Value, key) || len(c.Value) < 32 {
		t.Fatalf("cookie value is not a random session id: %q", c.Value)
	}
	if resp, body := b.do("GET", "/v1/users/me", "", nil); resp.StatusCode != 200 || !strings.Contains(body, `"alice"`) {
		t.Fatalf("users/me with the cookie: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do("GET", "/v1/login", "", nil); resp.StatusCode != 200 || !strings.Contains(body, b.csrf) {
		t.Fatalf("GET /v1/login: %d %s", resp.StatusCode, body)
	}
	// State changes without the token, or with a wrong one, are refused.
	for _, h := range []http.Header{{"Content-Type": {"application/json"}}, jsonCSRF("x" + b.csrf)} {
		resp, body := b.do("DELETE", "/v1/threads/nope", "", h)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, string(wire.CodeNotAllowed)) {
			t.Fatalf("DELETE without the CSRF token: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := b.do("DELETE", "/v1/threads/nope", "", jsonCSRF(b.csrf)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("DELETE with the CSRF token: %d %s", resp.StatusCode, body)
	}
	// The bearer header is checked as before even with a cookie.
	if resp, _ := b.do("GET", "/v1/threads", "", authHeader("wrong")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong bearer with a good cookie: %d", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/v1/logout", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without the CSRF token: %d", resp.StatusCode)
	}
	resp, _ := b.do("POST", "/v1/logout", "", jsonCSRF(b.csrf))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Fatalf("logout does not clear the cookie: %v", resp.Header)
	}
	if resp, _ := b.do("GET", "/v1/threads", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("cookie after logout: %d", resp.StatusCode)
	}
}

// TestLoginRefusals: a wrong key, a form post and a cross-origin login
// get no cookie.
func TestLoginRefusals(t *testing.T) {
	e := newEnv(t)
	b := &browser{e: e}
	cases := []struct {
		name, body string
		hdr        http.Header
		want       int
	}{
		{"wrong key", `{"key":"bwk_nope_nope"}`, http.Header{"Content-Type": {"application/json"}}, http.StatusUnauthorized},
		{"empty key", `{"key":""}`, http.Header{"Content-Type": {"application/json"}}, http.StatusUnauthorized},
		{"form post", `key=` + testToken, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType},
		{"other origin", `{"key":"` + testToken + `"}`, http.Header{"Content-Type": {"application/json"}, "Origin": {"http://attacker.example"}}, http.StatusForbidden},
		{"bad json", `{"key":`, http.Header{"Content-Type": {"application/json"}}, http.StatusBadRequest},
	}
	for _, c := range cases {
		resp, body := b.do("POST", "/v1/login", c.body, c.hdr)
		if resp.StatusCode != c.want || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %d %v %s, want %d and no cookie", c.name, resp.StatusCode, resp.Cookies(), body, c.want)
		}
	}
	b.cookie = &http.Cookie{Name: web.SessionCookie, Value: strings.Repeat("ab", 32)}
	if resp, _ := b.do("GET", "/v1/threads", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("made-up session id: %d", resp.StatusCode)
	}
}

// TestLoginWebSocket: the cookie opens the WebSocket from the bridge's own
// origin, not from another; revoking the key closes the socket (1008)
// and ends the session.
func TestLoginWebSocket(t *testing.T) {
	e := newEnv(t)
	key, keyID := e.userKey("bob")
	b := e.login(key)
	dial := func(origin string) (*websocket.Conn, *http.Response, error) {
		h := http.Header{"Cookie": {b.cookie.String()}, "Origin": {origin}}
		return (&websocket.Dialer{HandshakeTimeout: waitFor}).Dial(e.wsURL(), h)
	}
	if conn, resp, err := dial("http://attacker.example"); err == nil {
		conn.Close()
		t.Fatal("a cross-origin page opened the WebSocket with the cookie")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: %v %v", resp, err)
	}
	conn, _, err := dial(e.hs.URL)
	if err != nil {
		t.Fatalf("same-origin upgrade with the cookie: %v", err)
	}
	s := &session{t: t, conn: conn}
	t.Cleanup(func() { conn.Close() })
	s.send(wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{Version: wire.Version, Role: wire.RoleClient}))
	if env := s.read(); env.Type != wire.TypeHello {
		t.Fatalf("want hello, got %s %s", env.Type, env.Data)
	}
	e.adminJSON("DELETE", "/v1/keys/"+keyID, "", nil)
	if code := s.expectClosed(); code != websocket.ClosePolicyViolation {
		t.Fatalf("close code after revocation: %d", code)
	}
	if resp, _ := b.do("GET", "/v1/threads", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("cookie of a revoked key: %d", resp.StatusCode)
	}
}

// TestLoginExpires: a session ends at its TTL.
func TestLoginExpires(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.SessionTTL = 300 * time.Millisecond })
	b := e.login(testToken)
	if resp, _ := b.do("GET", "/v1/threads", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	time.Sleep(400 * time.Millisecond)
	if resp, _ := b.do("GET", "/v1/threads", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
}

// TestWebPage: the page and its assets are served at / without a login,
// with a strict Content-Security-Policy; an API path still needs one.
func TestWebPage(t *testing.T) {
	e := newEnv(t)
	b := &browser{e: e}
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "javascript", "/app.css": "text/css"} {
		resp, body := b.do("GET", path, "", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || body == "" {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
	}
	if resp, _ := b.do("GET", "/index.html", "", nil); resp.StatusCode == http.StatusOK {
		t.Fatal("GET /index.html served the page without going through /")
	}
	if resp, _ := b.do("GET", "/v1/nothing", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown API path without credentials: %d", resp.StatusCode)
	}
}
