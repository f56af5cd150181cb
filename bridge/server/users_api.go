package server

import (
	"net/http"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
)

// The admin HTTP API (admins only) behind `bridge users`, `bridge keys`
// and `bridge audit` while a bridge runs, and GET /v1/users/me for
// everyone. Routes are listed in docs/users.md.

// adminRoutes mounts GET /v1/users/me for everyone and the admin API of
// bridge/auth (users, keys, audit) for admins.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.Handle("GET /v1/users/me", s.auth(http.HandlerFunc(s.usersMe)))
	api := auth.AdminAPI{A: s.authn, Principal: func(r *http.Request) auth.Principal { return principalFrom(r.Context()) }}
	api.Routes(mux, s.admin)
}

// UserInfo is the answer of GET /v1/users/me.
type UserInfo struct {
	User   string      `json:"user"`
	Admin  bool        `json:"admin"`
	Via    string      `json:"via"`
	KeyID  string      `json:"key_id,omitempty"`
	Limits auth.Limits `json:"limits"`
	Usage  UserUsage   `json:"usage"`
}

// UserUsage is what a user uses now.
type UserUsage struct {
	// Sandboxes is how many of the user's threads have a sandbox.
	Sandboxes int `json:"sandboxes"`
	// TokensToday is the model tokens the user's sandboxes used this UTC
	// day (counted by this bridge process).
	TokensToday int64 `json:"tokens_today"`
}

func (s *Server) usersMe(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	writeJSON(w, http.StatusOK, UserInfo{User: p.User, Admin: p.Admin, Via: p.Via, KeyID: p.KeyID,
		Limits: s.limitsOf(r.Context(), p), Usage: UserUsage{Sandboxes: s.liveThreadsOf(r.Context(), p.User),
			TokensToday: s.tokens.add(p.User, 0, time.Now())}})
}
