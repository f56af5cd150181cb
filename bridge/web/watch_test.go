package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/web"
)

// sessionKeyOf is the key Sessions gives the session of cookie c.
func sessionKeyOf(s *web.Sessions, c *http.Cookie) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(c)
	return s.SessionOf(r)
}

// ended returns a watch callback and a channel closed at its first call.
func ended() (func(), <-chan struct{}) {
	ch := make(chan struct{})
	var once bool
	return func() {
		if !once {
			once = true
			close(ch)
		}
	}, ch
}

// A connection's watch of its session ends at the logout, and at the
// session's expiry; a stopped watch is not called; a request with a
// bearer credential has no session to watch.
func TestWatchSessionEnds(t *testing.T) {
	w := newWorld(t)
	s, hs := w.start(web.Config{TTL: 400 * time.Millisecond}, false)

	c := login(t, hs, token)
	key := sessionKeyOf(s, c)
	if key == "" {
		t.Fatal("no session key for the cookie")
	}
	endA, a := ended()
	s.WatchSession(key, endA)
	endB, b := ended()
	stopB := s.WatchSession(key, endB)
	stopB()
	select {
	case <-a:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not ended by the session's expiry")
	}
	select {
	case <-b:
		t.Fatal("a stopped watch was called")
	case <-time.After(50 * time.Millisecond):
	}

	s2, hs2 := w.start(web.Config{}, false)
	c2 := login(t, hs2, token)
	endC, cEnded := ended()
	s2.WatchSession(sessionKeyOf(s2, c2), endC)
	logout(t, hs2, c2)
	select {
	case <-cEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not ended by the logout")
	}
	endD, dEnded := ended()
	s2.WatchSession(sessionKeyOf(s2, c2), endD) // a session that ended already
	select {
	case <-dEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("a watch of an ended session was not ended")
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(c2)
	r.Header.Set("Authorization", "Bearer "+token)
	if k := s2.SessionOf(r); k != "" {
		t.Errorf("a bearer request's session key %q, want none", k)
	}
}

// logout ends cookie c's session as the page does: the CSRF token from
// GET /v1/login, then POST /v1/logout.
func logout(t *testing.T, hs *httptest.Server, c *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/login", nil)
	req.AddCookie(c)
	resp, err := client(hs).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ CSRF string }
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.CSRF == "" {
		t.Fatalf("GET /v1/login: %v", err)
	}
	req, _ = http.NewRequest(http.MethodPost, hs.URL+"/v1/logout", nil)
	req.AddCookie(c)
	req.Header.Set(web.CSRFHeader, info.CSRF)
	resp, err = client(hs).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
}
