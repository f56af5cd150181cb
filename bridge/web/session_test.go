package web_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/web"
)

const token = "tok-web-test"

// world is a bridge's browser side without the rest of the bridge: an
// authenticator on a real store and the sessions in a data folder.
type world struct {
	t     *testing.T
	dir   string
	db    *store.Store
	authn *auth.Authenticator
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &world{t: t, dir: dir, db: db, authn: mustAuth(t, db, token)}
}

func mustAuth(t *testing.T, db *store.Store, tok string) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Config{AdminToken: tok, Store: db.Accounts()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// start is one bridge run: its sessions behind a test server whose
// other routes say who the request comes from.
func (w *world) start(cfg web.Config, tlsOn bool) (*web.Sessions, *httptest.Server) {
	w.t.Helper()
	if cfg.Auth == nil {
		cfg.Auth = w.authn
	}
	cfg.Store, cfg.File = w.db.Accounts(), web.SessionsFile(w.dir)
	if cfg.AdminToken == "" {
		cfg.AdminToken = token
	}
	s, err := web.New(context.Background(), cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	mux.HandleFunc("/whoami", func(rw http.ResponseWriter, r *http.Request) {
		p, err := s.Authenticate(r)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(rw, p.User)
	})
	var hs *httptest.Server
	if tlsOn {
		hs = httptest.NewTLSServer(mux)
	} else {
		hs = httptest.NewServer(mux)
	}
	w.t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs
}

func client(hs *httptest.Server) *http.Client {
	if hs.TLS != nil {
		return hs.Client()
	}
	return http.DefaultClient
}

// login posts key and returns the session cookie.
func login(t *testing.T, hs *httptest.Server, key string) *http.Cookie {
	t.Helper()
	resp, err := client(hs).Post(hs.URL+"/v1/login", "application/json", strings.NewReader(`{"key":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("login: %d %s", resp.StatusCode, b)
	}
	for _, c := range resp.Cookies() {
		if c.Name == web.SessionCookie {
			return c
		}
	}
	t.Fatal("login set no cookie")
	return nil
}

// whoami answers who cookie logs in ("" with the status when refused).
func whoami(t *testing.T, hs *httptest.Server, c *http.Cookie) (string, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", hs.URL+"/whoami", nil)
	req.AddCookie(c)
	resp, err := client(hs).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode
	}
	return string(b), resp.StatusCode
}

// TestSessionsSurviveRestart: a session opened with the admin token and
// one with a user's key work after the bridge restarts (New again on the
// same file), and the file holds no cookie value.
func TestSessionsSurviveRestart(t *testing.T) {
	w := newWorld(t)
	if _, err := w.authn.AddUser(context.Background(), "ann", false, auth.Limits{}); err != nil {
		t.Fatal(err)
	}
	key, _, err := w.authn.CreateKey(context.Background(), "ann", "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	s1, hs1 := w.start(web.Config{}, false)
	admin, ann := login(t, hs1, token), login(t, hs1, key)
	hs1.Close()
	s1.Close()

	raw, err := os.ReadFile(web.SessionsFile(w.dir))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), admin.Value) || strings.Contains(string(raw), ann.Value) || strings.Contains(string(raw), token) {
		t.Fatalf("the sessions file holds a cookie or the token: %s", raw)
	}
	if fi, _ := os.Stat(web.SessionsFile(w.dir)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("sessions file mode %v", fi.Mode())
	}

	_, hs2 := w.start(web.Config{}, false)
	for c, want := range map[*http.Cookie]string{admin: auth.AdminUser, ann: "ann"} {
		if got, code := whoami(t, hs2, c); got != want {
			t.Fatalf("after restart: %q %d, want %q", got, code, want)
		}
	}
}

// TestSessionsNotRestoredWhenInvalid: after a restart, a session whose
// key was revoked meanwhile (on the store, the bridge down), whose user
// was deleted, or opened with a bridge token that has changed, is gone;
// so is one that expired.
func TestSessionsNotRestoredWhenInvalid(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	for _, u := range []string{"bob", "cat"} {
		if _, err := w.authn.AddUser(ctx, u, false, auth.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	bobKey, bobStored, _ := w.authn.CreateKey(ctx, "bob", "web", 0)
	catKey, _, _ := w.authn.CreateKey(ctx, "cat", "web", 0)
	s1, hs1 := w.start(web.Config{}, false)
	admin, bob, cat := login(t, hs1, token), login(t, hs1, bobKey), login(t, hs1, catKey)
	hs1.Close()
	s1.Close()

	if _, err := w.authn.RevokeKey(ctx, bobStored.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.authn.DeleteUser(ctx, "cat"); err != nil {
		t.Fatal(err)
	}
	other := mustAuth(t, w.db, "tok-new")
	_, hs2 := w.start(web.Config{Auth: other, AdminToken: "tok-new"}, false)
	for name, c := range map[string]*http.Cookie{"old token": admin, "revoked key": bob, "deleted user": cat} {
		if got, code := whoami(t, hs2, c); code != http.StatusUnauthorized {
			t.Fatalf("%s after restart: %q %d, want 401", name, got, code)
		}
	}

	w2 := newWorld(t)
	s3, hs3 := w2.start(web.Config{TTL: 200 * time.Millisecond}, false)
	short := login(t, hs3, token)
	hs3.Close()
	s3.Close()
	time.Sleep(300 * time.Millisecond)
	_, hs4 := w2.start(web.Config{}, false)
	if _, code := whoami(t, hs4, short); code != http.StatusUnauthorized {
		t.Fatalf("expired session after restart: %d", code)
	}
}

// TestSessionsFileCorrupt: a sessions file that is not JSON costs the
// logins, not the start.
func TestSessionsFileCorrupt(t *testing.T) {
	w := newWorld(t)
	if err := os.WriteFile(web.SessionsFile(w.dir), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, hs := w.start(web.Config{}, false)
	c := login(t, hs, token)
	if got, _ := whoami(t, hs, c); got != auth.AdminUser {
		t.Fatalf("login after a corrupt file: %q", got)
	}
}

// TestSecureCookieOverTLS: over TLS the cookie is Secure (and still
// HttpOnly, SameSite=Strict).
func TestSecureCookieOverTLS(t *testing.T) {
	w := newWorld(t)
	_, hs := w.start(web.Config{}, true)
	c := login(t, hs, token)
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie over TLS: %+v", c)
	}
	_, plain := w.start(web.Config{}, false)
	if c := login(t, plain, token); c.Secure {
		t.Fatal("cookie over plain HTTP on loopback is Secure: the browser would drop it")
	}
}

// TestPlainHTTPBeyondLoopback: over plain HTTP that came in on an
// address other than loopback, the page and the login are refused (403
// not_allowed naming --tls-cert) unless InsecureHTTP; the same over TLS,
// or on loopback, is served. (The requests carry the listener's address
// as net/http sets it; no traffic leaves loopback.)
func TestPlainHTTPBeyondLoopback(t *testing.T) {
	w := newWorld(t)
	handler := func(insecure bool) http.Handler {
		s, err := web.New(context.Background(), web.Config{Auth: w.authn, AdminToken: token, InsecureHTTP: insecure})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		mux := http.NewServeMux()
		s.Routes(mux)
		return mux
	}
	do := func(h http.Handler, method, path, local string, tlsOn bool) *httptest.ResponseRecorder {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"key":"` + token + `"}`)
		}
		r := httptest.NewRequest(method, path, body)
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(local), Port: 7420}))
		if tlsOn {
			r.TLS = &tls.ConnectionState{}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	strict := handler(false)
	for _, c := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/app.js"}, {"GET", "/v1/login"}, {"POST", "/v1/login"}} {
		rec := do(strict, c.method, c.path, "192.0.2.10", false)
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusForbidden || e.Error.Code != "not_allowed" || !strings.Contains(e.Error.Message, "--tls-cert") || rec.Header().Get("Set-Cookie") != "" {
			t.Fatalf("plain %s %s beyond loopback: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
	}
	if rec := do(strict, "GET", "/", "192.0.2.10", true); rec.Code != http.StatusOK {
		t.Fatalf("TLS beyond loopback: %d", rec.Code)
	}
	if rec := do(strict, "POST", "/v1/login", "192.0.2.10", true); rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Set-Cookie"), "Secure") {
		t.Fatalf("TLS login beyond loopback: %d %v", rec.Code, rec.Header())
	}
	for _, local := range []string{"127.0.0.1", "::1"} {
		if rec := do(strict, "GET", "/", local, false); rec.Code != http.StatusOK {
			t.Fatalf("plain on %s: %d", local, rec.Code)
		}
	}
	if rec := do(handler(true), "GET", "/", "192.0.2.10", false); rec.Code != http.StatusOK {
		t.Fatalf("--insecure-http beyond loopback: %d", rec.Code)
	}
}
