package web_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/web"
)

const clientID = "boxwire-web"

// provider is an OpenID provider on loopback with discovery, a JWKS and
// a token endpoint whose answer a test sets (the authorize step is the
// test's own: it reads the bridge's redirect and comes back).
type provider struct {
	t   *testing.T
	srv *httptest.Server
	key *rsa.PrivateKey

	mu sync.Mutex
	// answer makes the token endpoint's answer from the form it got.
	answer func(form url.Values) (int, any)
	// lifetime is how long its ID tokens last (5 minutes when 0).
	lifetime time.Duration
}

func newProvider(t *testing.T) *provider {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{t: t, key: k}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		u := p.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": u, "authorization_endpoint": u + "/authorize",
			"token_endpoint": u + "/token", "jwks_uri": u + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		status, body := p.answer(r.PostForm)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// idToken signs claims for user with the provider's key.
func (p *provider) idToken(user, nonce string) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		p.t.Fatal(err)
	}
	now, life := time.Now().Unix(), int64(300)
	if p.lifetime > 0 {
		life = int64(p.lifetime / time.Second)
	}
	payload, _ := json.Marshal(map[string]any{"iss": p.srv.URL, "aud": clientID, "sub": user, "iat": now, "exp": now + life, "nonce": nonce})
	obj, err := s.Sign(payload)
	if err != nil {
		p.t.Fatal(err)
	}
	raw, _ := obj.CompactSerialize()
	return raw
}

// oidcWorld is the sessions with OIDC sign-in at p, behind a test server.
func oidcWorld(t *testing.T, p *provider) *httptest.Server {
	w := newWorld(t)
	ctx := context.Background()
	v, err := auth.NewOIDCVerifier(ctx, auth.OIDCConfig{Issuer: p.srv.URL, Audience: clientID, CreateUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{AdminToken: token, Store: w.db.Accounts(), OIDC: v})
	if err != nil {
		t.Fatal(err)
	}
	_, hs := w.start(web.Config{Auth: a, OIDC: &web.OIDCLogin{Issuer: p.srv.URL, ClientID: clientID, ClientSecret: "s3cret"}}, false)
	return hs
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// begin starts a sign-in and returns the provider URL it redirects to
// and the flow's cookie.
func begin(t *testing.T, hs *httptest.Server) (*url.URL, *http.Cookie) {
	t.Helper()
	resp, err := noRedirect.Get(hs.URL + "/v1/login/oidc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || len(resp.Cookies()) != 1 {
		t.Fatalf("begin: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	if c.SameSite != http.SameSiteLaxMode || !c.HttpOnly || c.Value != loc.Query().Get("state") {
		t.Fatalf("flow cookie %+v for state %q", c, loc.Query().Get("state"))
	}
	return loc, c
}

// callback comes back from the provider with query and cookie and
// returns where the bridge sends the browser and the session cookie.
func callback(t *testing.T, hs *httptest.Server, query url.Values, c *http.Cookie) (string, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest("GET", hs.URL+"/v1/login/oidc/callback?"+query.Encode(), nil)
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	for _, s := range resp.Cookies() {
		if s.Name == web.SessionCookie {
			return resp.Header.Get("Location"), s
		}
	}
	return resp.Header.Get("Location"), nil
}

// TestOIDCSignIn: the flow sends the browser to the provider with a
// state, nonce and S256 challenge; the callback's code is exchanged with
// the verifier and the client secret, and the ID token starts a session
// of the user it names (created on first use).
func TestOIDCSignIn(t *testing.T) {
	p := newProvider(t)
	hs := oidcWorld(t, p)
	loc, flow := begin(t, hs)
	q := loc.Query()
	if loc.Path != "/authorize" || q.Get("client_id") != clientID || q.Get("code_challenge_method") != "S256" ||
		q.Get("redirect_uri") != hs.URL+"/v1/login/oidc/callback" || !strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("authorize URL %s", loc)
	}
	p.answer = func(f url.Values) (int, any) {
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if f.Get("code") != "c1" || f.Get("client_secret") != "s3cret" || base64.RawURLEncoding.EncodeToString(sum[:]) != q.Get("code_challenge") {
			return 400, map[string]string{"error": "invalid_grant"}
		}
		return 200, map[string]string{"id_token": p.idToken("dora", q.Get("nonce")), "token_type": "Bearer"}
	}
	where, session := callback(t, hs, url.Values{"code": {"c1"}, "state": {q.Get("state")}}, flow)
	if where != "/" || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("callback: to %q, cookie %+v", where, session)
	}
	if got, _ := whoami(t, hs, session); got != "dora" {
		t.Fatalf("signed in as %q", got)
	}
	// The same state again: each flow is used once.
	if where, s := callback(t, hs, url.Values{"code": {"c1"}, "state": {q.Get("state")}}, flow); s != nil || !strings.Contains(where, "used+already") {
		t.Fatalf("replayed callback: %q %v", where, s)
	}
}

// TestOIDCSignInRefusals: every way a callback can be wrong sends the
// browser back to the page with why, and no session.
func TestOIDCSignInRefusals(t *testing.T) {
	p := newProvider(t)
	hs := oidcWorld(t, p)
	for _, tc := range []struct {
		name   string
		answer func(nonce string) (int, any)
		query  func(state string) url.Values
		cookie bool
		want   string
	}{
		{"provider refused", nil, func(s string) url.Values {
			return url.Values{"error": {"access_denied"}, "error_description": {"user said no"}, "state": {s}}
		}, true, "the provider refused: access_denied user said no"},
		{"no flow cookie", nil, func(s string) url.Values { return url.Values{"code": {"c"}, "state": {s}} }, false, "not started by this browser"},
		{"another state", nil, func(string) url.Values { return url.Values{"code": {"c"}, "state": {"forged"}} }, true, "not started by this browser"},
		{"no code", nil, func(s string) url.Values { return url.Values{"state": {s}} }, true, "the provider sent no code"},
		{"token endpoint error", func(string) (int, any) { return 400, map[string]string{"error": "invalid_grant"} },
			func(s string) url.Values { return url.Values{"code": {"c"}, "state": {s}} }, true, "token endpoint answered 400 invalid_grant"},
		{"another nonce", func(string) (int, any) { return 200, map[string]string{"id_token": p.idToken("dora", "other")} },
			func(s string) url.Values { return url.Values{"code": {"c"}, "state": {s}} }, true, "another nonce"},
		{"a token not of the provider", func(n string) (int, any) { return 200, map[string]string{"id_token": "a.b.c"} },
			func(s string) url.Values { return url.Values{"code": {"c"}, "state": {s}} }, true, "the provider's ID token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc, flow := begin(t, hs)
			nonce := loc.Query().Get("nonce")
			if tc.answer != nil {
				p.mu.Lock()
				p.answer = func(url.Values) (int, any) { return tc.answer(nonce) }
				p.mu.Unlock()
			}
			c := flow
			if !tc.cookie {
				c = nil
			}
			where, session := callback(t, hs, tc.query(loc.Query().Get("state")), c)
			msg, _ := url.QueryUnescape(strings.TrimPrefix(where, "/#login_error="))
			if session != nil || !strings.HasPrefix(where, "/#login_error=") || !strings.Contains(msg, tc.want) {
				t.Fatalf("to %q (%q), session %v; want %q", where, msg, session, tc.want)
			}
		})
	}
}

// TestLoginOptions: the page learns whether it may sign in with OIDC.
func TestLoginOptions(t *testing.T) {
	p := newProvider(t)
	for hs, want := range map[*httptest.Server]string{oidcWorld(t, p): `{"oidc":"` + p.srv.URL + `"}`} {
		resp, err := http.Get(hs.URL + "/v1/login/options")
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(b.String()) != want {
			t.Fatalf("options: %s", b.String())
		}
	}
	_, plain := newWorld(t).start(web.Config{}, false)
	resp, err := http.Get(plain.URL + "/v1/login/options")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	if strings.TrimSpace(b.String()) != "{}" {
		t.Fatalf("options without OIDC: %s", b.String())
	}
	if resp, _ := http.Get(plain.URL + "/v1/login/oidc"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("OIDC sign-in route without OIDC: %d", resp.StatusCode)
	}
}
