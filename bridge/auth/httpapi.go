package auth

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// AdminAPI serves the admin HTTP routes behind `bridge users`, `bridge
// keys` and `bridge audit` while a bridge runs (docs/users.md lists them):
// users, keys and the audit log of A. The caller mounts it behind its own
// authentication, which lets only admins through, and says who each
// request comes from (Principal), for the audit log.
type AdminAPI struct {
	A *Authenticator
	// Principal returns who r comes from.
	Principal func(r *http.Request) Principal
}

// maxAdminBody bounds an admin request's body.
const maxAdminBody = 16 << 10

// Routes registers the routes on mux, each wrapped by guard (the caller's
// admins-only authentication).
func (api AdminAPI) Routes(mux *http.ServeMux, guard func(http.Handler) http.Handler) {
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /v1/users":              api.listUsers,
		"POST /v1/users":             api.addUser,
		"DELETE /v1/users/{name}":    api.deleteUser,
		"POST /v1/users/{name}/keys": api.createKey,
		"GET /v1/keys":               api.listKeys,
		"DELETE /v1/keys/{id}":       api.revokeKey,
		"GET /v1/audit":              api.listAudit,
	} {
		mux.Handle(pattern, guard(h))
	}
}

// record writes an audit entry for r's principal.
func (api AdminAPI) record(r *http.Request, action, detail string) {
	api.A.Record(r.Context(), api.Principal(r), action, "", detail, r.RemoteAddr)
}

// writeJSON and writeError answer as the bridge's other routes do
// (bridge/internal/httpjson).
var (
	writeJSON  = httpjson.Write
	writeError = httpjson.Error
)

func (api AdminAPI) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := api.A.Users(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if us == nil {
		us = []User{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": us})
}

func (api AdminAPI) addUser(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name   string `json:"name"`
		Admin  bool   `json:"admin"`
		Limits Limits `json:"limits"`
	}
	if !readBody(w, r, &req) {
		return
	}
	u, err := api.A.AddUser(r.Context(), req.Name, req.Admin, req.Limits)
	if err != nil {
		adminError(w, err)
		return
	}
	api.record(r, "user.add", u.Name)
	writeJSON(w, http.StatusCreated, u)
}

func (api AdminAPI) deleteUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := api.A.DeleteUser(r.Context(), name); err != nil {
		adminError(w, err)
		return
	}
	api.record(r, "user.delete", name)
	w.WriteHeader(http.StatusNoContent)
}

func (api AdminAPI) createKey(w http.ResponseWriter, r *http.Request) {
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
			writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "expires_in: want a positive duration such as 720h")
			return
		}
		ttl = d
	}
	key, k, err := api.A.CreateKey(r.Context(), r.PathValue("name"), req.Name, ttl)
	if err != nil {
		adminError(w, err)
		return
	}
	api.record(r, "key.create", k.ID+" for "+k.User)
	writeJSON(w, http.StatusCreated, CreatedKey{Key: key, Stored: k})
}

func (api AdminAPI) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := api.A.Keys(r.Context(), r.URL.Query().Get("user"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if ks == nil {
		ks = []Key{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": ks})
}

func (api AdminAPI) revokeKey(w http.ResponseWriter, r *http.Request) {
	k, err := api.A.RevokeKey(r.Context(), r.PathValue("id"))
	if err != nil {
		adminError(w, err)
		return
	}
	api.record(r, "key.revoke", k.ID+" of "+k.User)
	writeJSON(w, http.StatusOK, k)
}

func (api AdminAPI) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := AuditFilter{User: q.Get("user"), Action: q.Get("action"), Thread: q.Get("thread")}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "since: want an RFC 3339 time")
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "limit: want a number")
			return
		}
		f.Limit = n
	}
	es, err := api.A.Audit(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	if es == nil {
		es = []AuditEntry{}
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
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return false
	}
	return true
}

// adminError answers an auth error with its status.
func adminError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, wire.CodeNotFound, err.Error())
	case errors.Is(err, ErrExists):
		writeError(w, http.StatusConflict, wire.CodeNotAllowed, err.Error())
	default:
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, err.Error())
	}
}
