package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// loginExpires is the expiry GET /v1/login tells of cookie's session
// (zero with the status when refused).
func loginExpires(t *testing.T, hs *httptest.Server, c *http.Cookie) (time.Time, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", hs.URL+"/v1/login", nil)
	req.AddCookie(c)
	resp, err := client(hs).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct{ Expires time.Time }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return time.Time{}, resp.StatusCode
	}
	return info.Expires, resp.StatusCode
}

// TestOIDCSessionEndsWithTheIDToken: a session opened with an OIDC ID
// token, by the sign-in flow or typed into the login field, ends when the
// token expires (its exp), well before the session TTL: its cookie says
// so, GET /v1/login says so, and once the token's time is up the cookie
// logs nobody in.
func TestOIDCSessionEndsWithTheIDToken(t *testing.T) {
	p := newProvider(t)
	p.lifetime = 3 * time.Second
	hs := oidcWorld(t, p)

	loc, flow := begin(t, hs)
	q := loc.Query()
	var tokenExp time.Time
	p.answer = func(url.Values) (int, any) {
		tok := p.idToken("erin", q.Get("nonce"))
		tokenExp = time.Unix(time.Now().Unix()+3, 0)
		return 200, map[string]string{"id_token": tok}
	}
	_, signedIn := callback(t, hs, url.Values{"code": {"c1"}, "state": {q.Get("state")}}, flow)
	if signedIn == nil {
		t.Fatal("the sign-in set no session cookie")
	}
	typed := login(t, hs, p.idToken("erin", ""))
	for name, c := range map[string]*http.Cookie{"sign-in": signedIn, "login field": typed} {
		if c.MaxAge <= 0 || c.MaxAge > 3 {
			t.Errorf("%s: cookie Max-Age %d, want at most the token's 3 s", name, c.MaxAge)
		}
		exp, code := loginExpires(t, hs, c)
		if code != http.StatusOK || exp.After(tokenExp.Add(time.Second)) {
			t.Errorf("%s: GET /v1/login %d expires %v, want by the token's exp %v", name, code, exp, tokenExp)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range []*http.Cookie{signedIn, typed} {
		for {
			if _, code := whoami(t, hs, c); code == http.StatusUnauthorized {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session still works after its ID token expired at %v", tokenExp)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, code := loginExpires(t, hs, typed); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/login after the token expired: %d", code)
	}
}
