package pgstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
	"github.com/boxwire/boxwire/bridge/web"
)

// The web_sessions rows: kept, read, replaced, ended; an expired one is
// not read and goes at the next put.
func TestWebSessionRows(t *testing.T) {
	t.Parallel()
	s := open(t, newDatabase(t), store.Options{})
	ctx := context.Background()
	if _, ok, err := s.WebSession(ctx, "k1"); ok || err != nil {
		t.Fatalf("a session never kept: ok %v, %v", ok, err)
	}
	if err := s.PutWebSession(ctx, "k1", []byte(`{"a":1}`), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebSession(ctx, "old", []byte(`{}`), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if data, ok, err := s.WebSession(ctx, "k1"); !ok || err != nil || string(data) != `{"a":1}` {
		t.Fatalf("kept session: %q ok %v, %v", data, ok, err)
	}
	if _, ok, err := s.WebSession(ctx, "old"); ok || err != nil {
		t.Fatalf("an expired session was read: ok %v, %v", ok, err)
	}
	if err := s.PutWebSession(ctx, "k1", []byte(`{"a":2}`), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := s.WebSession(ctx, "k1"); string(data) != `{"a":2}` {
		t.Fatalf("replaced session reads %q", data)
	}
	if err := s.DeleteWebSession(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebSession(ctx, "never"); err != nil {
		t.Fatalf("ending a session that is not there: %v", err)
	}
	if _, ok, _ := s.WebSession(ctx, "k1"); ok {
		t.Fatal("an ended session is still read")
	}
}

// sessionsBridge is one bridge's browser side on the shared database:
// its sessions (web.Config.Shared on its own pgstore.Store) behind a test
// server, with /whoami saying who a request comes from.
func sessionsBridge(t *testing.T, url, token string) *httptest.Server {
	t.Helper()
	_, hs := sessionsOf(t, url, token)
	return hs
}

// sessionsOf is sessionsBridge with its sessions.
func sessionsOf(t *testing.T, url, token string) (*web.Sessions, *httptest.Server) {
	t.Helper()
	db := open(t, url, store.Options{})
	authn, err := auth.New(auth.Config{AdminToken: token, Store: db.Accounts()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := web.New(context.Background(), web.Config{Auth: authn, Store: db.Accounts(), AdminToken: token, Shared: db})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		p, err := s.Authenticate(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, p.User)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs
}

// call sends method path to hs with cookie c (and the CSRF token when
// not empty) and returns the status and body.
func call(t *testing.T, hs *httptest.Server, method, path string, body string, c *http.Cookie, csrf string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c != nil {
		req.AddCookie(c)
	}
	if csrf != "" {
		req.Header.Set(web.CSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if c == nil {
		for _, rc := range resp.Cookies() {
			if rc.Name == web.SessionCookie {
				return resp.StatusCode, rc.Value
			}
		}
	}
	return resp.StatusCode, string(b)
}

// A browser logged in through one bridge is logged in through every
// bridge on the database (a load balancer may send its next request to
// any, a forwarding bridge passes its cookie on), also through a bridge
// started after the login; the row holds no cookie value; a bridge with
// another admin token does not take a session of the token; a logout
// through one bridge ends the session on the others within a second.
func TestWebSessionsSharedByBridges(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	const token = "tok-shared-sessions"
	a, b := sessionsBridge(t, url, token), sessionsBridge(t, url, token)
	other := sessionsBridge(t, url, "tok-another")

	code, value := call(t, a, http.MethodPost, "/v1/login", `{"key":"`+token+`"}`, nil, "")
	if code != http.StatusOK || value == "" {
		t.Fatalf("login through bridge a: %d %q", code, value)
	}
	cookie := &http.Cookie{Name: web.SessionCookie, Value: value}
	for name, hs := range map[string]*httptest.Server{"a": a, "b": b, "c (started after the login)": sessionsBridge(t, url, token)} {
		if code, who := call(t, hs, http.MethodGet, "/whoami", "", cookie, ""); code != http.StatusOK || who != auth.AdminUser {
			t.Errorf("bridge %s: %d %q, want the admin", name, code, who)
		}
	}
	if code, _ := call(t, other, http.MethodGet, "/whoami", "", cookie, ""); code != http.StatusUnauthorized {
		t.Errorf("a bridge with another admin token took the token's session: %d", code)
	}
	sum := sha256.Sum256([]byte(value))
	row, ok, err := open(t, url, store.Options{}).WebSession(context.Background(), hex.EncodeToString(sum[:]))
	if !ok || err != nil || bytes.Contains(row, []byte(value)) {
		t.Fatalf("the session's row (ok %v, %v) is missing or holds the cookie value", ok, err)
	}

	_, info := call(t, b, http.MethodGet, "/v1/login", "", cookie, "")
	csrf := between(info, `"csrf":"`, `"`)
	if code, _ := call(t, b, http.MethodPost, "/v1/logout", "", cookie, ""); code != http.StatusForbidden {
		t.Fatalf("a logout through b without the CSRF token: %d, want 403", code)
	}
	if code, _ := call(t, b, http.MethodPost, "/v1/logout", "", cookie, csrf); code != http.StatusNoContent {
		t.Fatalf("logout through b with the CSRF token of its GET /v1/login: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := call(t, a, http.MethodGet, "/whoami", "", cookie, "")
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge a still takes the session 5 s after the logout through b: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := call(t, b, http.MethodGet, "/whoami", "", cookie, ""); code != http.StatusUnauthorized {
		t.Errorf("bridge b takes the session it ended: %d", code)
	}
}

// A connection one bridge watches the session of ends when the session
// is logged out through another bridge, at the watching bridge's next
// Recheck (its lease tick calls it); a Recheck with nothing ended ends
// nothing.
func TestWebSessionWatchEndsAtRecheck(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	const token = "tok-session-watch"
	a, ahs := sessionsOf(t, url, token)
	_, bhs := sessionsOf(t, url, token)
	_, value := call(t, ahs, http.MethodPost, "/v1/login", `{"key":"`+token+`"}`, nil, "")
	cookie := &http.Cookie{Name: web.SessionCookie, Value: value}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.AddCookie(cookie)
	ended := make(chan struct{})
	a.WatchSession(a.SessionOf(req), func() { close(ended) })
	if n, err := a.Recheck(context.Background()); n != 0 || err != nil {
		t.Fatalf("a recheck with the session live: %d ended, %v", n, err)
	}
	_, info := call(t, bhs, http.MethodGet, "/v1/login", "", cookie, "")
	if code, _ := call(t, bhs, http.MethodPost, "/v1/logout", "", cookie, between(info, `"csrf":"`, `"`)); code != http.StatusNoContent {
		t.Fatalf("logout through b: %d", code)
	}
	if n, err := a.Recheck(context.Background()); n != 1 || err != nil {
		t.Fatalf("a recheck after the logout through b: %d ended, %v; want 1", n, err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the watched connection was not ended")
	}
}

// between returns what s has between the first before and the after that
// follows it.
func between(s, before, after string) string {
	_, rest, _ := strings.Cut(s, before)
	v, _, _ := strings.Cut(rest, after)
	return v
}

var _ web.SharedSessions = (*pgstore.Store)(nil)
