package e2e_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/web"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A browser session works through any bridge on a shared store: logged
// in through bridge 1, the browser reads a thread bridge 0 relays through
// bridge 1 (the request passed on with its cookie), runs a turn in it
// over a WebSocket to bridge 1 (forwarded to bridge 0 with its cookie),
// and, logged out through bridge 0, is refused by bridge 1 too, and the
// WebSockets it opened through either bridge close (1008). Before,
// sessions were each bridge's own: bridge 0 refused the cookie bridge 1
// made, so a browser behind a load balancer, or on a thread another
// bridge relays, got 401.
func TestStorePostgresBrowserSessionThroughAnyBridge(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, helloScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=30s")
	th := envs[0].createThread(wire.CreateThread{})

	code, cookie, csrf := browserLogin(t, envs[1])
	if code != http.StatusOK {
		t.Fatalf("login through bridge 1: %d", code)
	}
	var info wire.ThreadInfo
	if code := browserCall(t, envs[1], http.MethodGet, "/v1/threads/"+th.ID, cookie, "", &info); code != http.StatusOK || info.SandboxID == "" || info.SandboxID != envs[0].threadInfo(th.ID).SandboxID {
		t.Fatalf("bridge 0's thread through bridge 1 with the session: %d %+v", code, info)
	}
	if code := browserCall(t, envs[0], http.MethodGet, "/v1/login", cookie, "", nil); code != http.StatusOK {
		t.Fatalf("GET /v1/login through bridge 0 with bridge 1's session: %d", code)
	}

	c := browserWS(t, envs[1], cookie, th.ID)
	defer c.Close()
	if err := c.WriteJSON(wire.MustNew(wire.TypeUserMessage, th.ID, "m1", wire.UserMessage{Text: "hello"})); err != nil {
		t.Fatal(err)
	}
	var said []string
	for done := false; !done; {
		var env wire.Envelope
		if err := c.ReadJSON(&env); err != nil {
			t.Fatalf("the turn over the forwarded browser WebSocket: %v (so far %q)", err, said)
		}
		switch env.Type {
		case wire.TypeAssistantMessage:
			var m wire.Text
			_ = env.Decode(&m)
			said = append(said, m.Text)
		case wire.TypeTurnDone:
			var d wire.TurnDone
			_ = env.Decode(&d)
			if d.Reason != wire.ReasonStop {
				t.Fatalf("turn ended %q", d.Reason)
			}
			done = true
		case wire.TypeError:
			t.Fatalf("error over the forwarded browser WebSocket: %s", env.Data)
		}
	}
	if !strings.Contains(strings.Join(said, " "), "now says hello") {
		t.Errorf("the turn said %q", said)
	}

	// Connections the session opened: c (bridge 1, forwarded to bridge 0),
	// one to bridge 0 itself, one to bridge 1 for a thread bridge 1 relays.
	direct := browserWS(t, envs[0], cookie, th.ID)
	defer direct.Close()
	th1 := envs[1].createThread(wire.CreateThread{})
	other := browserWS(t, envs[1], cookie, th1.ID)
	defer other.Close()

	if code := browserCall(t, envs[0], http.MethodPost, "/v1/logout", cookie, csrf, nil); code != http.StatusNoContent {
		t.Fatalf("logout through bridge 0: %d", code)
	}
	for name, ws := range map[string]*websocket.Conn{"forwarded through bridge 1": c, "to bridge 0": direct, "to bridge 1, its own thread": other} {
		if code := closeCodeOf(ws, 30*time.Second); code != websocket.ClosePolicyViolation {
			t.Errorf("the session's WebSocket %s after the logout: close %d, want 1008", name, code)
		}
	}
	waitFor(t, "bridge 1 to refuse the session ended through bridge 0", func() bool {
		return browserCall(t, envs[1], http.MethodGet, "/v1/login", cookie, "", nil) == http.StatusUnauthorized
	})
	if code := browserCall(t, envs[1], http.MethodGet, "/v1/threads/"+th.ID, cookie, "", nil); code != http.StatusUnauthorized {
		t.Errorf("the thread through bridge 1 after the logout: %d, want 401", code)
	}
}

// browserLogin logs in to e's bridge with the admin token as the page
// does and returns the status, the session cookie and its CSRF token.
func browserLogin(t *testing.T, e *env) (int, *http.Cookie, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.bridge.url+"/v1/login", strings.NewReader(`{"key":"`+e.token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", e.bridge.url)
	resp, err := (&http.Client{Timeout: eventTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var login struct{ CSRF string }
	_ = json.NewDecoder(resp.Body).Decode(&login)
	for _, c := range resp.Cookies() {
		if c.Name == web.SessionCookie {
			return resp.StatusCode, &http.Cookie{Name: c.Name, Value: c.Value}, login.CSRF
		}
	}
	return resp.StatusCode, nil, ""
}

// browserCall sends method path to e's bridge with the session cookie
// only (and csrf, when set), decodes a 2xx answer into out and returns
// the status.
func browserCall(t *testing.T, e *env, method, path string, cookie *http.Cookie, csrf string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, e.bridge.url+path, nil)
	req.AddCookie(cookie)
	req.Header.Set("Origin", e.bridge.url)
	if csrf != "" {
		req.Header.Set(web.CSRFHeader, csrf)
	}
	resp, err := (&http.Client{Timeout: eventTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// browserWS opens the chat WebSocket to e's bridge as a page of it does
// (the cookie, its Origin) and says hello for thread; it returns the
// connection once the hello is answered.
func browserWS(t *testing.T, e *env, cookie *http.Cookie, thread string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Origin": {e.bridge.url}, "Cookie": {cookie.String()}}
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.bridge.url, "http")+wire.Path, h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("browser WebSocket to %s: %v (status %d)", e.bridge.url, err, status)
	}
	_ = c.SetReadDeadline(time.Now().Add(turnTimeout))
	if err := c.WriteJSON(wire.MustNew(wire.TypeHello, thread, "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: thread})); err != nil {
		t.Fatal(err)
	}
	var env wire.Envelope
	if err := c.ReadJSON(&env); err != nil || env.Type != wire.TypeHello {
		t.Fatalf("hello over the browser WebSocket: %s %s %v", env.Type, env.Data, err)
	}
	return c
}

// closeCodeOf reads ws until it closes, at most within, and returns its
// close code (0 when it did not close, -1 when it ended without one).
func closeCodeOf(ws *websocket.Conn, within time.Duration) int {
	_ = ws.SetReadDeadline(time.Now().Add(within))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0
		}
		return -1
	}
}
