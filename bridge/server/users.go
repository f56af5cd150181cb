package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/web"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Identity and ownership (docs/users.md). Every request is authenticated
// (the bridge's own token as the admin, a user's API key, or an OIDC JWT)
// and carries its auth.Principal in its context. Every thread has an owner
// (ThreadRecord.Owner; threads from before users existed belong to
// auth.AdminUser). A thread is visible to its owner and to admins only; to
// anyone else it does not exist: the same 404 not_found, body and all, as
// a thread that was never made.

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the principal ctx carries; without one (internal
// calls) it is the admin.
func principalFrom(ctx context.Context) auth.Principal {
	if p, ok := ctx.Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Principal{User: auth.AdminUser, Admin: true, Via: "internal"}
}

// ownerName is the owner a record names; "" (a thread older than users)
// is the admin's.
func ownerName(owner string) string {
	if owner == "" {
		return auth.AdminUser
	}
	return owner
}

// mayAccess reports whether p may see and use a thread owned by owner.
func mayAccess(p auth.Principal, owner string) bool {
	return p.Admin || p.User == ownerName(owner)
}

// threadOwner returns the owner of thread id and whether the thread exists
// (live, or kept in the store).
func (s *Server) threadOwner(ctx context.Context, id string) (owner string, exists bool) {
	rec, ok, err := s.cfg.Store.Get(ctx, id)
	if err == nil && ok {
		return ownerName(rec.Owner), true
	}
	if s.lookup(id) != nil {
		return auth.AdminUser, true
	}
	return "", false
}

// ownerOf is the owner of thread id ("" when there is no such thread).
func (s *Server) ownerOf(ctx context.Context, id string) string {
	owner, _ := s.threadOwner(ctx, id)
	return owner
}

// visible reports whether the principal of ctx may use thread id; false
// also when there is no such thread.
func (s *Server) visible(ctx context.Context, id string) bool {
	owner, ok := s.threadOwner(ctx, id)
	return ok && mayAccess(principalFrom(ctx), owner)
}

// notFound is the answer for a thread that does not exist or is not the
// caller's: the two must not be told apart.
func notFound(w http.ResponseWriter, id string) {
	writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("thread %q not found", id))
}

// owned guards a /v1/threads/{id}… route: a thread the caller may not use,
// or none, is answered notFound before the handler runs.
func (s *Server) owned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !s.visible(r.Context(), id) {
			notFound(w, id)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// auth authenticates every request before any upgrade: 401 without valid
// credentials, 429 while the client's address is held back after too many
// failures. The principal goes into the request's context.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.web.Authenticate(r) // the bearer credentials, else the session cookie
		switch {
		case errors.Is(err, web.ErrCSRF):
			writeJSONError(w, http.StatusForbidden, wire.CodeNotAllowed, err.Error())
			return
		case errors.Is(err, auth.ErrTooManyFailures):
			w.Header().Set("Retry-After", "60")
			writeJSONError(w, http.StatusTooManyRequests, wire.CodeUnauthorized, err.Error())
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxwire"`)
			writeJSONError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// admin lets only admins through (403 for others).
func (s *Server) admin(next http.Handler) http.Handler {
	return s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !principalFrom(r.Context()).Admin {
			writeJSONError(w, http.StatusForbidden, wire.CodeNotAllowed, "only an admin may do this")
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// record writes an audit entry for the principal of ctx.
func (s *Server) record(ctx context.Context, action, thread, detail, remote string) {
	s.authn.Record(ctx, principalFrom(ctx), action, thread, detail, remote)
}

// watchRevocation ends c when the credentials it authenticated with are
// revoked (or their user deleted): at once, not at its next request. The
// returned stop must be called when c ends.
func (s *Server) watchRevocation(ctx context.Context, c *client) (stop func()) {
	gone, unwatch := s.authn.Watch(principalFrom(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-gone:
			c.log.Info("credentials revoked: closing the connection")
			c.kick(websocket.ClosePolicyViolation, "credentials revoked", nil)
		case <-ctx.Done():
		}
	}()
	return func() {
		unwatch()
		<-done
	}
}

// quotaExceeded is the error of a request over the caller's limits.
func quotaExceeded(format string, args ...any) error {
	return wire.Error{Code: wire.CodeQuotaExceeded, Message: fmt.Sprintf(format, args...)}
}

// limitsOf returns the limits that apply to the user of p: their own,
// else the bridge's defaults. Admins have none.
func (s *Server) limitsOf(ctx context.Context, p auth.Principal) auth.Limits {
	if p.Admin {
		return auth.Limits{}
	}
	lim := s.cfg.UserLimits
	if u, err := s.authn.User(ctx, p.User); err == nil {
		if u.Limits.Sandboxes > 0 {
			lim.Sandboxes = u.Limits.Sandboxes
		}
		if u.Limits.TokensPerDay > 0 {
			lim.TokensPerDay = u.Limits.TokensPerDay
		}
	}
	return lim
}

// liveThreadsOf counts the threads of user that have a sandbox now.
func (s *Server) liveThreadsOf(ctx context.Context, user string) int {
	s.mu.Lock()
	ids := make([]string, 0, len(s.threads))
	for id := range s.threads {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if owner, ok := s.threadOwner(ctx, id); ok && owner == user {
			n++
		}
	}
	return n
}

// checkSandboxQuota refuses a new thread when its user already runs as
// many sandboxes as their limit allows.
func (s *Server) checkSandboxQuota(ctx context.Context) error {
	p := principalFrom(ctx)
	lim := s.limitsOf(ctx, p)
	if lim.Sandboxes <= 0 {
		return nil
	}
	if n := s.liveThreadsOf(ctx, p.User); n >= lim.Sandboxes {
		return quotaExceeded("user %s runs %d sandboxes, the most allowed at a time (limit %d); delete or leave one first", p.User, n, lim.Sandboxes)
	}
	return nil
}

// ownThreads keeps the threads the principal of ctx may see (all for an
// admin, who may filter by owner), each with its owner named.
func (s *Server) ownThreads(ctx context.Context, infos []wire.ThreadInfo, owner string) []wire.ThreadInfo {
	p := principalFrom(ctx)
	recs, _ := s.cfg.Store.List(ctx)
	owners := make(map[string]string, len(recs))
	for _, r := range recs {
		owners[r.ID] = ownerName(r.Owner)
	}
	out := infos[:0]
	for _, info := range infos {
		info.Owner = ownerName(owners[info.ID])
		if mayAccess(p, info.Owner) && (owner == "" || owner == info.Owner) {
			out = append(out, info)
		}
	}
	return out
}

// audited records action on the thread of the route (before the handler
// runs: the audit says who asked). An empty action names a file transfer
// by its method: files.download for GET, files.upload otherwise, with the
// path asked for.
func (s *Server) audited(action string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, detail := action, ""
		if a == "" {
			a, detail = "files.upload", r.URL.Query().Get("path")
			if r.Method == http.MethodGet {
				a = "files.download"
			}
		}
		s.record(r.Context(), a, r.PathValue("id"), detail, r.RemoteAddr)
		next.ServeHTTP(w, r)
	})
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

// boxOwner is the owner of the threads of sandbox box (the first found;
// a sandbox's threads share one owner, see assistantFor).
func (s *Server) boxOwner(box string) string {
	s.mu.Lock()
	var id string
	for tid, t := range s.threads {
		if t.box != nil && t.box.ID() == box {
			id = tid
			break
		}
	}
	s.mu.Unlock()
	if id == "" {
		return auth.AdminUser
	}
	return ownerName(s.ownerOf(context.Background(), id))
}

// principalOf is the principal of a stored user, for limits.
func (s *Server) principalOf(ctx context.Context, user string) auth.Principal {
	u, err := s.authn.User(ctx, user)
	return auth.Principal{User: user, Admin: err == nil && u.Admin}
}

// admitModelCall refuses a model call of sandbox box when its owner's
// tokens for the day are spent (fleet.Config.LLMAdmit).
func (s *Server) admitModelCall(box string) error {
	ctx := context.Background()
	owner := s.boxOwner(box)
	lim := s.limitsOf(ctx, s.principalOf(ctx, owner))
	if lim.TokensPerDay <= 0 {
		return nil
	}
	if used := s.tokens.add(owner, 0, time.Now()); used >= lim.TokensPerDay {
		return quotaExceeded("user %s used %d model tokens today, the most allowed a day (limit %d); the count starts again at 00:00 UTC", owner, used, lim.TokensPerDay)
	}
	return nil
}

// countTokens adds a model call's tokens to its owner's day
// (fleet.Config.LLMUsage).
func (s *Server) countTokens(box string, tokens int) {
	s.tokens.add(s.boxOwner(box), int64(tokens), time.Now())
}

// assistantFor keeps assistants apart by user: a user's assistant "x" is
// not another user's "x" (they would share a sandbox and its files). An
// admin's names are used as they are.
func assistantFor(p auth.Principal, name string) string {
	if p.Admin || name == "" {
		return name
	}
	h := sha256.Sum256([]byte(p.User))
	return "u" + hex.EncodeToString(h[:6]) + "-" + name
}
