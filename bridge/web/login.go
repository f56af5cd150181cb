package web

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Session cookie and CSRF header names.
const (
	SessionCookie = "boxwire_session"
	CSRFHeader    = "X-Boxwire-CSRF"
)

// Session bounds.
const (
	// DefaultSessionTTL is a session's life when Config.TTL is 0.
	DefaultSessionTTL = 12 * time.Hour
	// maxLoginBody bounds POST /v1/login's body.
	maxLoginBody = 16 << 10
)

// ErrCSRF is a cookie-authenticated state change without its CSRF token.
var ErrCSRF = errors.New("a request authenticated by the session cookie must carry its CSRF token in " + CSRFHeader)

// Config configures the browser sessions and the page.
type Config struct {
	// Auth checks the credentials a login exchanges and the bearer ones
	// of every other request; it also writes the audit log. Required.
	Auth *auth.Authenticator
	// Store is where Auth keeps users and keys: a key's expiry bounds its
	// sessions, and a session kept across a restart is restored only
	// while its key and user are still there. Nil: sessions of keys are
	// not restored.
	Store auth.Store
	// AdminToken is the bridge's token: a session it opened survives a
	// restart only while the token stays the same.
	AdminToken string
	// TTL is a session's life; 0 means DefaultSessionTTL.
	TTL time.Duration
	// File keeps the sessions across restarts (SessionsFile); "" keeps
	// them in memory only. Unused with Shared.
	File string
	// Shared, when set, keeps the sessions in the store every bridge on
	// it reads (PostgreSQL), instead of File: see SharedSessions.
	Shared SharedSessions
	// InsecureHTTP serves the page and logins over plain HTTP beyond
	// loopback; without it they need TLS there (a cookie sent in clear
	// over a network is a stolen session).
	InsecureHTTP bool
	// OIDC, when set, lets the page sign in with an OpenID Connect
	// provider (oidc.go); New reads its discovery document.
	OIDC *OIDCLogin
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Sessions are the browser logins (docs/web.md). A browser cannot put a
// bearer key on a WebSocket, so POST /v1/login exchanges a credential
// (the admin token, a bwk_ key, an OIDC JWT) for a session cookie:
// HttpOnly, SameSite=Strict, Secure when served over TLS. The cookie
// holds only a random session id; the bridge maps it to the principal,
// and keeps that map (by the id's hash) in Config.File so a restart does
// not log anyone out. A session ends at its expiry (the key's own, if
// sooner), at logout, and when its key is revoked or its user deleted.
//
// Cookie-authenticated requests that change state (any method but GET
// and HEAD) must carry the session's CSRF token in X-Boxwire-CSRF, which
// login answers and GET /v1/login repeats to a page of the bridge's own
// origin. The WebSocket upgrade, a GET, is the server's to guard (its
// Origin check); SameSite=Strict keeps the cookie off cross-site requests
// to begin with. Sessions are safe for concurrent use.
type Sessions struct {
	cfg   Config
	log   *slog.Logger
	table *sessionTable
	oidc  *oidcSignIn // nil without Config.OIDC
}

// New returns the sessions of cfg, with those an earlier run kept in
// cfg.File that are still good. A kept file that cannot be read is
// logged and ignored (its browsers log in again). With cfg.OIDC it reads
// the provider's discovery document, bounded by ctx.
func New(ctx context.Context, cfg Config) (*Sessions, error) {
	if cfg.Auth == nil {
		return nil, errors.New("web: an authenticator is required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultSessionTTL
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	file := cfg.File
	if cfg.Shared != nil {
		file = ""
	}
	s := &Sessions{cfg: cfg, log: log, table: &sessionTable{file: file, shared: cfg.Shared, log: log, m: map[string]*session{}}}
	if cfg.OIDC != nil {
		var err error
		if s.oidc, err = newOIDCSignIn(ctx, *cfg.OIDC); err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
	}
	if err := s.table.load(ctx, &s.cfg, time.Now()); err != nil {
		log.Warn("browser sessions of the last run are lost", "err", err)
	}
	return s, nil
}

// Close stops watching the sessions' credentials; the file keeps them
// for the next start. It is idempotent.
func (s *Sessions) Close() { s.table.closeAll() }

// Authenticate says who r comes from: its bearer credentials when it has
// an Authorization header, else its session cookie. A cookie-
// authenticated request that changes state without the session's CSRF
// token fails with ErrCSRF.
func (s *Sessions) Authenticate(r *http.Request) (auth.Principal, error) {
	c, err := r.Cookie(SessionCookie)
	if r.Header.Get("Authorization") != "" || err != nil {
		return s.cfg.Auth.Authenticate(r.Context(), r)
	}
	ss, ok := s.table.get(r.Context(), &s.cfg, c.Value, time.Now())
	if !ok {
		return auth.Principal{}, auth.ErrUnauthorized
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !csrfMatches(r, ss) {
		return auth.Principal{}, ErrCSRF
	}
	return ss.P, nil
}

// RelayCredential is what a dial of r's client to another bridge (the
// thread's relay, on the shared store) carries of r: its Authorization,
// or else its session cookie (the bridges share their sessions:
// SharedSessions), and nothing else of its headers.
func RelayCredential(r *http.Request) http.Header {
	h := http.Header{}
	if a := r.Header.Get("Authorization"); a != "" {
		h.Set("Authorization", a)
	} else if c, err := r.Cookie(SessionCookie); err == nil {
		h.Set("Cookie", (&http.Cookie{Name: c.Name, Value: c.Value}).String())
	}
	return h
}

func csrfMatches(r *http.Request, ss *session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.CSRF)) == 1
}

// loginRequest is POST /v1/login's body.
type loginRequest struct {
	Key string `json:"key"`
}

// loginInfo answers a login and GET /v1/login.
type loginInfo struct {
	User    string    `json:"user"`
	Admin   bool      `json:"admin"`
	Via     string    `json:"via"`
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"expires"`
}

// postLogin exchanges the credential in the body for a session cookie.
// It takes JSON only and refuses a cross-origin Origin, so a page
// elsewhere cannot log the browser in as someone else.
func (s *Sessions) postLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, wire.CodeNotAllowed, "login from another origin")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, wire.CodeBadMessage, "login takes application/json: {\"key\": \"…\"}")
		return
	}
	var req loginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "login body: "+err.Error())
		return
	}
	key := strings.TrimSpace(req.Key)
	p, err := s.cfg.Auth.AuthenticateToken(r.Context(), r.RemoteAddr, key)
	switch {
	case errors.Is(err, auth.ErrTooManyFailures):
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, wire.CodeUnauthorized, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "wrong, expired or revoked key")
		return
	}
	ss, err := s.open(w, r, p, key)
	if err != nil {
		s.log.Warn("browser login", "err", err)
		writeError(w, http.StatusServiceUnavailable, wire.CodeInternal, "the session could not be kept: "+err.Error())
		return
	}
	writeLoginInfo(w, ss)
}

// open starts a session of p (logged in with credential key: the admin
// token, an API key or an OIDC ID token, checked by then), sets its
// cookie and writes the audit entry. It fails only when a shared store
// cannot keep the session (no cookie is set then).
func (s *Sessions) open(w http.ResponseWriter, r *http.Request, p auth.Principal, key string) (*session, error) {
	now := time.Now()
	ss := &session{P: p, CSRF: randomHex(32), Created: now, Expires: s.expiry(r.Context(), p, key, now)}
	if p.Via == "token" {
		ss.TokenHash = tokenHash(key)
	}
	ss.gone, ss.unwatch = s.cfg.Auth.Watch(p)
	cookie, err := s.table.add(r.Context(), ss, now)
	if err != nil {
		ss.unwatch()
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: cookie, Path: "/", Expires: ss.Expires,
		MaxAge: int(time.Until(ss.Expires).Seconds()), HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	s.cfg.Auth.Record(r.Context(), p, "login", "", p.Via, r.RemoteAddr)
	return ss, nil
}

// expiry is when a session of p made at now with credential key ends:
// after the session TTL, or when its key expires if that is sooner, or,
// for an OIDC ID token, when the token does (its exp claim).
func (s *Sessions) expiry(ctx context.Context, p auth.Principal, key string, now time.Time) time.Time {
	exp := now.Add(s.cfg.TTL)
	if p.KeyID != "" && s.cfg.Store != nil {
		if k, err := s.cfg.Store.Key(ctx, p.KeyID); err == nil && k.Expires != nil && k.Expires.Before(exp) {
			exp = *k.Expires
		}
	}
	if p.Via == "oidc" {
		if t, ok := jwtExpiry(key); ok && t.Before(exp) {
			exp = t
		}
	}
	return exp
}

// getLogin tells a page of the bridge's origin who its cookie logs in,
// and the CSRF token (after a reload the page has lost it).
func (s *Sessions) getLogin(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "not logged in")
		return
	}
	ss, ok := s.table.get(r.Context(), &s.cfg, c.Value, time.Now())
	if !ok {
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "not logged in")
		return
	}
	writeLoginInfo(w, ss)
}

// postLogout ends the cookie's session (with its CSRF token) and clears
// the cookie; without a live session it only clears the cookie.
func (s *Sessions) postLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if ss, ok := s.table.get(r.Context(), &s.cfg, c.Value, time.Now()); ok {
			if !csrfMatches(r, ss) {
				writeError(w, http.StatusForbidden, wire.CodeNotAllowed, ErrCSRF.Error())
				return
			}
			if err := s.table.drop(r.Context(), c.Value); err != nil {
				s.log.Warn("browser logout", "err", err)
				writeError(w, http.StatusServiceUnavailable, wire.CodeInternal, "the session could not be ended: "+err.Error())
				return
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func writeLoginInfo(w http.ResponseWriter, ss *session) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(loginInfo{User: ss.P.User, Admin: ss.P.Admin, Via: ss.P.Via, CSRF: ss.CSRF, Expires: ss.Expires})
}

// sameOrigin reports whether r has no Origin (not a browser's
// cross-origin request) or one whose host is r's Host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// writeError answers {"error": {code, message}}, as every API route does.
func writeError(w http.ResponseWriter, status int, code wire.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error wire.Error `json:"error"`
	}{wire.Error{Code: code, Message: strings.TrimSpace(msg)}})
}
