package users

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Auth authenticates every request before any upgrade: 401 without valid
// credentials, 403 for Config.Forbidden, 429 while the client's address is
// held back after too many failures. The principal goes into the
// request's context.
func (u *Users) Auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := u.cfg.Authenticate(r)
		switch {
		case u.cfg.Forbidden != nil && errors.Is(err, u.cfg.Forbidden):
			httpjson.Error(w, http.StatusForbidden, wire.CodeNotAllowed, err.Error())
			return
		case errors.Is(err, auth.ErrTooManyFailures):
			w.Header().Set("Retry-After", "60")
			httpjson.Error(w, http.StatusTooManyRequests, wire.CodeUnauthorized, err.Error())
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxwire"`)
			httpjson.Error(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing or wrong bearer token")
			return
		}
		ctx := WithPrincipal(r.Context(), p)
		if u.cfg.Sessions != nil {
			if k := u.cfg.Sessions.SessionOf(r); k != "" {
				ctx = context.WithValue(ctx, sessionKey{}, k)
			}
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Admin authenticates (Auth) and lets only admins through (403 for
// others).
func (u *Users) Admin(next http.Handler) http.Handler {
	return u.Auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !PrincipalOf(r.Context()).Admin {
			httpjson.Error(w, http.StatusForbidden, wire.CodeNotAllowed, "only an admin may do this")
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// Owned guards a /v1/threads/{id}… route behind Auth: a thread the caller
// may not use, or none, is answered 404 before the handler runs.
func (u *Users) Owned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !u.Visible(r.Context(), id) {
			httpjson.NotFound(w, id)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Audited records action on the thread of the route (before the handler
// runs: the audit says who asked). An empty action names a file transfer
// by its method: files.download for GET, files.upload otherwise, with the
// path asked for.
func (u *Users) Audited(action string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, detail := action, ""
		if a == "" {
			a, detail = "files.upload", r.URL.Query().Get("path")
			if r.Method == http.MethodGet {
				a = "files.download"
			}
		}
		u.Record(r.Context(), a, r.PathValue("id"), detail, r.RemoteAddr)
		next.ServeHTTP(w, r)
	})
}

// Routes mounts GET /v1/users/me for everyone and the admin API of
// bridge/auth (users, keys, audit) for admins.
func (u *Users) Routes(mux *http.ServeMux) {
	mux.Handle("GET /v1/users/me", u.Auth(http.HandlerFunc(u.me)))
	api := auth.AdminAPI{A: u.cfg.Authn, Principal: func(r *http.Request) auth.Principal { return PrincipalOf(r.Context()) }}
	api.Routes(mux, u.Admin)
}

// Info is the answer of GET /v1/users/me.
type Info struct {
	User   string      `json:"user"`
	Admin  bool        `json:"admin"`
	Via    string      `json:"via"`
	KeyID  string      `json:"key_id,omitempty"`
	Limits auth.Limits `json:"limits"`
	Usage  Usage       `json:"usage"`
}

// Usage is what a user uses now.
type Usage struct {
	// Sandboxes is how many of the user's threads have a sandbox.
	Sandboxes int `json:"sandboxes"`
	// TokensToday is the model tokens the user's sandboxes used this UTC
	// day (counted by this bridge process).
	TokensToday int64 `json:"tokens_today"`
}

func (u *Users) me(w http.ResponseWriter, r *http.Request) {
	p := PrincipalOf(r.Context())
	httpjson.Write(w, http.StatusOK, Info{User: p.User, Admin: p.Admin, Via: p.Via, KeyID: p.KeyID,
		Limits: u.LimitsOf(r.Context(), p), Usage: Usage{Sandboxes: u.liveThreadsOf(r.Context(), p.User),
			TokensToday: u.tokens.add(p.User, 0, time.Now())}})
}

// tokenDays counts each user's model tokens in the current UTC day, for
// Limits.TokensPerDay. The count is the bridge process's own: it starts
// again at zero after a restart (documented in docs/users.md).
type tokenDays struct {
	mu   sync.Mutex
	day  string
	used map[string]int64
}

// add counts n tokens of user today and returns the day's total.
func (d *tokenDays) add(user string, n int64, now time.Time) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if today := now.UTC().Format(time.DateOnly); d.day != today {
		d.day, d.used = today, map[string]int64{}
	}
	d.used[user] += n
	return d.used[user]
}
