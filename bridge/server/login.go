package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Browser sessions (docs/web.md). A browser cannot put a bearer key on a
// WebSocket, so POST /v1/login exchanges a credential (the admin token, a
// bwk_ key, an OIDC JWT) for a session cookie: HttpOnly, SameSite=Strict,
// Secure when served over TLS. The cookie holds only a random session id;
// the bridge maps it to the principal, in memory (a restart logs everyone
// out). A session ends at its expiry (the key's own, if sooner), at
// logout, and when its key is revoked or its user deleted.
//
// Cookie-authenticated requests that change state (any method but GET and
// HEAD) must carry the session's CSRF token in X-Boxwire-CSRF, which
// login answers and GET /v1/login repeats to a page of the bridge's own
// origin. The WebSocket upgrade, a GET, refuses a cross-site Origin
// (gorilla/websocket's check); SameSite=Strict keeps the cookie off
// cross-site requests to begin with.

// Session cookie and CSRF header names.
const (
	SessionCookie = "boxwire_session"
	CSRFHeader    = "X-Boxwire-CSRF"
)

// Session bounds.
const (
	// DefaultSessionTTL is a session's life when Config.SessionTTL is 0.
	DefaultSessionTTL = 12 * time.Hour
	// maxSessions bounds the sessions kept; past it the oldest goes.
	maxSessions = 10000
	// maxLoginBody bounds POST /v1/login's body.
	maxLoginBody = 16 << 10
)

// errCSRF is a cookie-authenticated state change without its CSRF token.
var errCSRF = errors.New("a request authenticated by the session cookie must carry its CSRF token in " + CSRFHeader)

// session is one browser login.
type session struct {
	p       auth.Principal
	csrf    string
	created time.Time
	expires time.Time
	gone    <-chan struct{} // closed when the credentials are revoked
	unwatch func()
}

// sessions holds the live sessions by id. It starts no goroutines: a
// session's revocation is seen when it is next used (its WebSocket
// connections are closed at once by watchRevocation, users.go), and dead
// sessions are swept at each login. Safe for concurrent use.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

// live reports whether ss may be used at now.
func (ss *session) live(now time.Time) bool {
	select {
	case <-ss.gone:
		return false
	default:
		return now.Before(ss.expires)
	}
}

// get returns the live session id names; a dead one is forgotten.
func (st *sessions) get(id string, now time.Time) (*session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ss := st.m[id]
	if ss == nil {
		return nil, false
	}
	if !ss.live(now) {
		st.dropLocked(id)
		return nil, false
	}
	return ss, true
}

// add keeps ss under a new random id, sweeping dead sessions (and the
// oldest, when full) first.
func (st *sessions) add(ss *session, now time.Time) string {
	id := randomHex(32)
	st.mu.Lock()
	defer st.mu.Unlock()
	var oldest string
	for k, v := range st.m {
		if !v.live(now) {
			st.dropLocked(k)
		} else if oldest == "" || v.created.Before(st.m[oldest].created) {
			oldest = k
		}
	}
	if len(st.m) >= maxSessions && oldest != "" {
		st.dropLocked(oldest)
	}
	st.m[id] = ss
	return id
}

// drop forgets session id (logout).
func (st *sessions) drop(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropLocked(id)
}

func (st *sessions) dropLocked(id string) {
	if ss := st.m[id]; ss != nil {
		ss.unwatch()
		delete(st.m, id)
	}
}

// closeAll forgets every session (Server.Close).
func (st *sessions) closeAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := range st.m {
		st.dropLocked(id)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// authenticate says who r comes from: its bearer credentials when it has
// an Authorization header, else its session cookie. A cookie-authenticated
// request that changes state without the session's CSRF token fails with
// errCSRF.
func (s *Server) authenticate(r *http.Request) (auth.Principal, error) {
	c, err := r.Cookie(SessionCookie)
	if r.Header.Get("Authorization") != "" || err != nil {
		return s.authn.Authenticate(r.Context(), r)
	}
	ss, ok := s.sessions.get(c.Value, time.Now())
	if !ok {
		return auth.Principal{}, auth.ErrUnauthorized
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !csrfMatches(r, ss) {
		return auth.Principal{}, errCSRF
	}
	return ss.p, nil
}

func csrfMatches(r *http.Request, ss *session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
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
func (s *Server) postLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeJSONError(w, http.StatusForbidden, wire.CodeNotAllowed, "login from another origin")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSONError(w, http.StatusUnsupportedMediaType, wire.CodeBadMessage, "login takes application/json: {\"key\": \"…\"}")
		return
	}
	var req loginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody)).Decode(&req); err != nil {
		writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "login body: "+err.Error())
		return
	}
	p, err := s.authn.AuthenticateToken(r.Context(), r.RemoteAddr, strings.TrimSpace(req.Key))
	switch {
	case errors.Is(err, auth.ErrTooManyFailures):
		w.Header().Set("Retry-After", "60")
		writeJSONError(w, http.StatusTooManyRequests, wire.CodeUnauthorized, err.Error())
		return
	case err != nil:
		writeJSONError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "wrong, expired or revoked key")
		return
	}
	now := time.Now()
	ss := &session{p: p, csrf: randomHex(32), created: now, expires: s.sessionExpiry(r.Context(), p, now)}
	ss.gone, ss.unwatch = s.authn.Watch(p)
	id := s.sessions.add(ss, now)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/", Expires: ss.expires,
		MaxAge: int(time.Until(ss.expires).Seconds()), HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	s.record(withPrincipal(r.Context(), p), "login", "", "", r.RemoteAddr)
	writeLoginInfo(w, ss)
}

// sessionExpiry is when a session of p made at now ends: after the
// session TTL, or when its key expires if that is sooner.
func (s *Server) sessionExpiry(ctx context.Context, p auth.Principal, now time.Time) time.Time {
	ttl := s.cfg.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	exp := now.Add(ttl)
	if p.KeyID != "" {
		if k, err := s.db.Key(ctx, p.KeyID); err == nil && k.Expires != nil && k.Expires.Before(exp) {
			exp = *k.Expires
		}
	}
	return exp
}

// getLogin tells a page of the bridge's origin who its cookie logs in,
// and the CSRF token (after a reload the page has lost it).
func (s *Server) getLogin(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "not logged in")
		return
	}
	ss, ok := s.sessions.get(c.Value, time.Now())
	if !ok {
		writeJSONError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "not logged in")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeLoginInfo(w, ss)
}

// postLogout ends the cookie's session (with its CSRF token) and clears
// the cookie; without a live session it only clears the cookie.
func (s *Server) postLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if ss, ok := s.sessions.get(c.Value, time.Now()); ok {
			if !csrfMatches(r, ss) {
				writeJSONError(w, http.StatusForbidden, wire.CodeNotAllowed, errCSRF.Error())
				return
			}
			s.sessions.drop(c.Value)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func writeLoginInfo(w http.ResponseWriter, ss *session) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(loginInfo{User: ss.p.User, Admin: ss.p.Admin, Via: ss.p.Via, CSRF: ss.csrf, Expires: ss.expires})
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
