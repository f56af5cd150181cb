package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/boxwire/boxwire/bridge/auth"
)

// issuer is an OpenID provider on loopback: discovery and a JWKS whose
// keys the test can rotate.
type issuer struct {
	t   *testing.T
	srv *httptest.Server

	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey // by kid, served in the JWKS
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{t: t, keys: map[string]*rsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"authorization_endpoint": is.srv.URL + "/auth", "token_endpoint": is.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
		}
		json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) addKey(kid string) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = k
	is.mu.Unlock()
	return k
}

func (is *issuer) dropKey(kid string) {
	is.mu.Lock()
	delete(is.keys, kid)
	is.mu.Unlock()
}

// sign makes a JWT of claims signed by k under kid.
func sign(t *testing.T, k *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestOIDC: tokens of the configured issuer and audience, signed by a key
// of its JWKS and not expired, authenticate as the user their claim
// names (created on first use); everything else is refused, including
// alg none; a rotated key is picked up without a restart.
func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	k1 := is.addKey("k1")
	ctx := context.Background()
	v, err := auth.NewOIDCVerifier(ctx, auth.OIDCConfig{Issuer: is.srv.URL, Audience: "boxwire", Claim: "email", CreateUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	a, st, _ := newAuth(t, func(c *auth.Config) { c.OIDC = v; c.Failures = auth.FailureLimit{Max: 1000} })
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": is.srv.URL, "aud": "boxwire", "sub": "u1", "email": "carol@example.com",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := sign(t, k1, "k1", claims(nil))
	p, err := a.Authenticate(ctx, request("10.0.0.1:1", good))
	if err != nil || p.User != "carol@example.com" || p.Via != "oidc" || p.Admin {
		t.Fatalf("valid token: %+v %v", p, err)
	}
	if _, err := st.User(ctx, "carol@example.com"); err != nil {
		t.Fatalf("user not created on first use: %v", err)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	payload, _ := json.Marshal(claims(nil))
	algNone := noneHeader + "." + base64.RawURLEncoding.EncodeToString(payload) + "."
	bad := map[string]string{
		"expired":        sign(t, k1, "k1", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
		"wrong audience": sign(t, k1, "k1", claims(func(c map[string]any) { c["aud"] = "someone-else" })),
		"wrong issuer":   sign(t, k1, "k1", claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"unknown kid":    sign(t, other, "k9", claims(nil)),
		"wrong key":      sign(t, other, "k1", claims(nil)),
		"alg none":       algNone,
		"bad claim":      sign(t, k1, "k1", claims(func(c map[string]any) { c["email"] = "has spaces" })),
		"admin claim":    sign(t, k1, "k1", claims(func(c map[string]any) { c["email"] = auth.AdminUser })),
	}
	for name, tok := range bad {
		if !strings.Contains(tok, ".") {
			t.Fatalf("%s: not a JWT", name)
		}
		if _, err := a.Authenticate(ctx, request("10.0.0.1:1", tok)); !errors.Is(err, auth.ErrUnauthorized) {
			t.Errorf("%s: %v, want unauthorized", name, err)
		}
	}

	// Rotation: the issuer starts signing with k2 and drops k1.
	k2 := is.addKey("k2")
	is.dropKey("k1")
	rotated := sign(t, k2, "k2", claims(nil))
	if p, err := a.Authenticate(ctx, request("10.0.0.1:1", rotated)); err != nil || p.User != "carol@example.com" {
		t.Fatalf("token of the rotated key: %+v %v", p, err)
	}
}
