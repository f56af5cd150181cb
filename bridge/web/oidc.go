package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/boxwire/boxwire/bridge/auth"
)

// OIDC sign-in: the page's "Sign in with …" button runs an OpenID Connect
// authorization-code flow with PKCE. GET /v1/login/oidc sends the browser
// to the provider with a fresh state, nonce and code challenge (the state
// also in a short-lived cookie, so the answer must come back to the
// browser that asked); the provider sends it back to GET
// /v1/login/oidc/callback with a code, which the bridge exchanges at the
// provider's token endpoint for an ID token. That token is checked like a
// bearer JWT (auth: issuer, audience, signature, expiry; the user its
// claim names, created on first use when allowed), its nonce against the
// flow's, and then the session starts as for any login.

// OIDCLogin configures the sign-in flow.
type OIDCLogin struct {
	// Issuer is the provider, the one whose bearer JWTs the bridge
	// accepts (auth.OIDCConfig.Issuer). Required.
	Issuer string
	// ClientID is the bridge's client at the provider; its ID tokens name
	// it as their audience, so it must be auth.OIDCConfig.Audience.
	// Required.
	ClientID string
	// ClientSecret is the client's secret; "" for a public client (PKCE
	// alone).
	ClientSecret string
	// RedirectURL is the callback the provider knows; "" means
	// <scheme>://<Host>/v1/login/oidc/callback of the request.
	RedirectURL string
	// Scopes are asked for; default openid, profile, email.
	Scopes []string
	// HTTPClient reaches the provider; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// LogValue shows c without its secret.
func (c OIDCLogin) LogValue() slog.Value {
	return slog.GroupValue(slog.String("issuer", c.Issuer), slog.String("client_id", c.ClientID),
		slog.Bool("client_secret_set", c.ClientSecret != ""), slog.String("redirect_url", c.RedirectURL))
}

const (
	oidcCookie  = "boxwire_oidc"
	oidcFlowTTL = 10 * time.Minute
	maxFlows    = 1000
	callbackURL = "/v1/login/oidc/callback"
)

// oidcFlow is one sign-in under way.
type oidcFlow struct {
	nonce, verifier, redirect string
	expires                   time.Time
}

// oidcSignIn runs the flow for one provider. Safe for concurrent use.
type oidcSignIn struct {
	cfg      OIDCLogin
	authURL  string
	tokenURL string

	mu    sync.Mutex
	flows map[string]oidcFlow // by state
}

// newOIDCSignIn reads the provider's discovery document (bounded by ctx).
func newOIDCSignIn(ctx context.Context, cfg OIDCLogin) (*oidcSignIn, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("oidc sign-in: issuer and client id are required")
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc sign-in: discover %s: %w", cfg.Issuer, err)
	}
	ep := p.Endpoint()
	if ep.AuthURL == "" || ep.TokenURL == "" {
		return nil, fmt.Errorf("oidc sign-in: %s names no authorization or token endpoint", cfg.Issuer)
	}
	return &oidcSignIn{cfg: cfg, authURL: ep.AuthURL, tokenURL: ep.TokenURL, flows: map[string]oidcFlow{}}, nil
}

// begin keeps a new flow and returns its state.
func (o *oidcSignIn) begin(redirect string, now time.Time) (string, oidcFlow) {
	f := oidcFlow{nonce: randomHex(16), verifier: randomHex(32), redirect: redirect, expires: now.Add(oidcFlowTTL)}
	state := randomHex(16)
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, v := range o.flows {
		if now.After(v.expires) || len(o.flows) >= maxFlows {
			delete(o.flows, k)
		}
	}
	o.flows[state] = f
	return state, f
}

// take returns and forgets the flow of state (each is used once).
func (o *oidcSignIn) take(state string, now time.Time) (oidcFlow, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f, ok := o.flows[state]
	delete(o.flows, state)
	return f, ok && now.Before(f.expires)
}

// redirectURL is the callback for r.
func (o *oidcSignIn) redirectURL(r *http.Request) string {
	if o.cfg.RedirectURL != "" {
		return o.cfg.RedirectURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + callbackURL
}

// oidcStart sends the browser to the provider.
func (s *Sessions) oidcStart(w http.ResponseWriter, r *http.Request) {
	o := s.oidc
	redirect := o.redirectURL(r)
	state, f := o.begin(redirect, time.Now())
	challenge := sha256.Sum256([]byte(f.verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {o.cfg.ClientID}, "redirect_uri": {redirect},
		"scope": {strings.Join(o.cfg.Scopes, " ")}, "state": {state}, "nonce": {f.nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(o.authURL, "?") {
		sep = "&"
	}
	// Lax, not Strict: the provider's redirect back is a cross-site navigation.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state, Path: callbackURL, MaxAge: int(oidcFlowTTL.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, o.authURL+sep+q.Encode(), http.StatusFound)
}

// oidcCallback finishes a flow: the code for an ID token, the token for a
// session. Every failure goes back to the page, which shows it.
func (s *Sessions) oidcCallback(w http.ResponseWriter, r *http.Request) {
	p, idToken, err := s.oidcFinish(r)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: callbackURL, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	if err != nil {
		s.log.Info("oidc sign-in refused", "err", err, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/#login_error="+url.QueryEscape(err.Error()), http.StatusSeeOther)
		return
	}
	if _, err := s.open(w, r, p, idToken); err != nil {
		s.log.Warn("oidc sign-in", "err", err)
		http.Redirect(w, r, "/#login_error="+url.QueryEscape("the session could not be kept: "+err.Error()), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// oidcFinish checks the provider's answer and returns who signed in, with
// the ID token that says so.
func (s *Sessions) oidcFinish(r *http.Request) (auth.Principal, string, error) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return auth.Principal{}, "", fmt.Errorf("the provider refused: %s %s", e, q.Get("error_description"))
	}
	state := q.Get("state")
	c, err := r.Cookie(oidcCookie)
	if state == "" || err != nil || c.Value != state {
		return auth.Principal{}, "", errors.New("this sign-in was not started by this browser (or took over 10 minutes): try again")
	}
	f, ok := s.oidc.take(state, time.Now())
	if !ok {
		return auth.Principal{}, "", errors.New("this sign-in expired or was used already: try again")
	}
	raw, err := s.oidc.exchange(r.Context(), q.Get("code"), f)
	if err != nil {
		return auth.Principal{}, "", err
	}
	p, err := s.cfg.Auth.AuthenticateToken(r.Context(), r.RemoteAddr, raw)
	if err != nil {
		return auth.Principal{}, "", fmt.Errorf("the provider's ID token: %w", err)
	}
	if nonce, _ := jwtClaim(raw, "nonce").(string); nonce != f.nonce {
		return auth.Principal{}, "", errors.New("the provider's ID token has another nonce than this sign-in's")
	}
	return p, raw, nil
}

// exchange trades code for the ID token at the provider's token endpoint.
func (o *oidcSignIn) exchange(ctx context.Context, code string, f oidcFlow) (string, error) {
	if code == "" {
		return "", errors.New("the provider sent no code")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect},
		"client_id": {o.cfg.ClientID}, "code_verifier": {f.verifier}}
	if o.cfg.ClientSecret != "" {
		form.Set("client_secret", o.cfg.ClientSecret)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("token answer: %w", err)
	}
	var tok struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
		Desc    string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || resp.StatusCode != http.StatusOK || tok.IDToken == "" {
		return "", fmt.Errorf("token endpoint answered %d %s %s", resp.StatusCode, tok.Error, tok.Desc)
	}
	return tok.IDToken, nil
}

// jwtExpiry is the exp claim of a JWT whose signature was checked
// already; false when it has none.
func jwtExpiry(raw string) (time.Time, bool) {
	exp, ok := jwtClaim(raw, "exp").(float64)
	if !ok || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}

// jwtClaim is a claim of a JWT whose signature was checked already.
func jwtClaim(raw, name string) any {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var claims map[string]any
	if json.Unmarshal(payload, &claims) != nil {
		return nil
	}
	return claims[name]
}

// loginOptions tells the page how it may log in (GET /v1/login/options).
func (s *Sessions) loginOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	var opts struct {
		OIDC string `json:"oidc,omitempty"` // the issuer, when the page may sign in with it
	}
	if s.oidc != nil {
		opts.OIDC = s.oidc.cfg.Issuer
	}
	_ = json.NewEncoder(w).Encode(opts)
}
