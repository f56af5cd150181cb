package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The admin HTTP API (admins only) behind `bridge users`, `bridge keys`
// and `bridge audit` while a bridge runs, and GET /v1/users/me for
// everyone. Routes are listed in docs/users.md.

// maxAdminBody bounds an admin request's body.
const maxAdminBody = 16 << 10

func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.Handle("GET /v1/users/me", s.auth(http.HandlerFunc(s.usersMe)))
	mux.Handle("GET /v1/users", s.admin(http.HandlerFunc(s.listUsers)))
	mux.Handle("POST /v1/users", s.admin(http.HandlerFunc(s.addUser)))
	mux.Handle("DELETE /v1/users/{name}", s.admin(http.HandlerFunc(s.deleteUser)))
	mux.Handle("POST /v1/users/{name}/keys", s.admin(http.HandlerFunc(s.createKey)))
	mux.Handle("GET /v1/keys", s.admin(http.HandlerFunc(s.listKeys)))
	mux.Handle("DELETE /v1/keys/{id}", s.admin(http.HandlerFunc(s.revokeKey)))
	mux.Handle("GET /v1/audit", s.admin(http.HandlerFunc(s.listAudit)))
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

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := s.authn.Users(r.Context())
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if us == nil {
		us = []auth.User{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": us})
}

func (s *Server) addUser(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name   string      `json:"name"`
		Admin  bool        `json:"admin"`
		Limits auth.Limits `json:"limits"`
	}
	if !readBody(w, r, &req) {
		return
	}
	u, err := s.authn.AddUser(r.Context(), req.Name, req.Admin, req.Limits)
	if err != nil {
		adminError(w, err)
		return
	}
	s.record(r.Context(), "user.add", "", u.Name, r.RemoteAddr)
	writeJSON(w, http.StatusCreated, u)
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.authn.DeleteUser(r.Context(), name); err != nil {
		adminError(w, err)
		return
	}
	s.record(r.Context(), "user.delete", "", name, r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name      string `json:"name"`
		ExpiresIn string `json:"expires_in"`
	}
	if !readBody(w, r, &req) {
		return
	}
	var ttl time.Duration
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "expires_in: want a positive duration such as 720h")
			return
		}
		ttl = d
	}
	key, k, err := s.authn.CreateKey(r.Context(), r.PathValue("name"), req.Name, ttl)
	if err != nil {
		adminError(w, err)
		return
	}
	s.record(r.Context(), "key.create", "", k.ID+" for "+k.User, r.RemoteAddr)
	writeJSON(w, http.StatusCreated, auth.CreatedKey{Key: key, Stored: k})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.authn.Keys(r.Context(), r.URL.Query().Get("user"))
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if ks == nil {
		ks = []auth.Key{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": ks})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	k, err := s.authn.RevokeKey(r.Context(), r.PathValue("id"))
	if err != nil {
		adminError(w, err)
		return
	}
	s.record(r.Context(), "key.revoke", "", k.ID+" of "+k.User, r.RemoteAddr)
	writeJSON(w, http.StatusOK, k)
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := auth.AuditFilter{User: q.Get("user"), Action: q.Get("action"), Thread: q.Get("thread")}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "since: want an RFC 3339 time")
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "limit: want a number")
			return
		}
		f.Limit = n
	}
	es, err := s.authn.Audit(r.Context(), f)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if es == nil {
		es = []auth.AuditEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": es})
}

// readBody decodes a small JSON body into v, answering 400 when it cannot.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return false
	}
	return true
}

// adminError answers an auth error with its status.
func adminError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, auth.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, err.Error())
	case errors.Is(err, auth.ErrExists):
		writeJSONError(w, http.StatusConflict, wire.CodeNotAllowed, err.Error())
	default:
		writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, err.Error())
	}
}
