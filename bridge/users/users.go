package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/wire"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf returns the principal ctx carries; without one (internal
// calls) it is the admin.
func PrincipalOf(ctx context.Context) auth.Principal {
	if p, ok := ctx.Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Principal{User: auth.AdminUser, Admin: true, Via: "internal"}
}

// OwnerName is the owner a record names; "" (a thread older than users)
// is the admin's.
func OwnerName(owner string) string {
	if owner == "" {
		return auth.AdminUser
	}
	return owner
}

// MayAccess reports whether p may see and use a thread owned by owner.
func MayAccess(p auth.Principal, owner string) bool {
	return p.Admin || p.User == OwnerName(owner)
}

// AssistantFor keeps assistants apart by user: a user's assistant "x" is
// not another user's "x" (they would share a sandbox and its files). An
// admin's names are used as they are.
func AssistantFor(p auth.Principal, name string) string {
	if p.Admin || name == "" {
		return name
	}
	h := sha256.Sum256([]byte(p.User))
	return "u" + hex.EncodeToString(h[:6]) + "-" + name
}

// Threads is what Users needs of the server's threads. It must be safe
// for concurrent use.
type Threads interface {
	// Owner returns the owner of thread id, OwnerName applied, and whether
	// the thread exists (live, or kept in the store).
	Owner(ctx context.Context, id string) (owner string, exists bool)
	// Live returns the ids of the threads that have a sandbox now.
	Live() []string
	// OfBox returns the id of a thread of sandbox box, "" when it has
	// none (a sandbox's threads share one owner: AssistantFor).
	OfBox(box string) string
}

// Config configures Users. Authn, Authenticate and Threads are required.
type Config struct {
	// Authn holds the users, their keys and the audit log.
	Authn *auth.Authenticator
	// Authenticate says who a request comes from (the bearer credentials,
	// else the browser session: web.Sessions.Authenticate).
	Authenticate func(r *http.Request) (auth.Principal, error)
	// Forbidden is the error of Authenticate that is answered 403 with its
	// message (web.ErrCSRF) rather than 401.
	Forbidden error
	// Threads are the server's threads.
	Threads Threads
	// Limits are the limits of users who have none of their own; zero
	// means no limit. Admins have none.
	Limits auth.Limits
	// Sessions, when set, are the browser sessions (web.Sessions): a
	// connection a session opened ends when the session does (Watch), and
	// Recheck rechecks them too.
	Sessions Sessions
}

// Sessions are the browser sessions as Users needs them (web.Sessions).
type Sessions interface {
	// SessionOf returns the key of the session r is authenticated by, or
	// "" when r is not authenticated by one.
	SessionOf(r *http.Request) string
	// WatchSession calls end, which must not block, once the session
	// under key ends; stop ends the watch.
	WatchSession(key string, end func()) (stop func())
	// Recheck ends the sessions ended through another bridge and returns
	// how many.
	Recheck(ctx context.Context) (int, error)
}

// sessionKey is the context key of the browser session a request came
// with (Auth).
type sessionKey struct{}

// sessionOf returns the browser session key ctx carries ("" for none).
func sessionOf(ctx context.Context) string {
	k, _ := ctx.Value(sessionKey{}).(string)
	return k
}

// Users applies identity, ownership and quotas; make it with New.
type Users struct {
	cfg    Config
	tokens tokenDays
}

// New returns the Users of cfg.
func New(cfg Config) *Users { return &Users{cfg: cfg} }

// Visible reports whether the principal of ctx may use thread id; false
// also when there is no such thread.
func (u *Users) Visible(ctx context.Context, id string) bool {
	owner, ok := u.cfg.Threads.Owner(ctx, id)
	return ok && MayAccess(PrincipalOf(ctx), owner)
}

// Hidden reports whether thread id exists but is not the caller's: it is
// to be answered as one that does not exist.
func (u *Users) Hidden(ctx context.Context, id string) bool {
	owner, ok := u.cfg.Threads.Owner(ctx, id)
	return ok && !MayAccess(PrincipalOf(ctx), owner)
}

// OwnerOf is the owner of thread id ("" when there is no such thread).
func (u *Users) OwnerOf(ctx context.Context, id string) string {
	owner, _ := u.cfg.Threads.Owner(ctx, id)
	return owner
}

// Filter keeps the threads the principal of ctx may see (all for an
// admin, who may filter by owner), each with its owner named.
func (u *Users) Filter(ctx context.Context, infos []wire.ThreadInfo, owner string) []wire.ThreadInfo {
	p := PrincipalOf(ctx)
	out := infos[:0]
	for _, info := range infos {
		info.Owner = OwnerName(u.OwnerOf(ctx, info.ID))
		if MayAccess(p, info.Owner) && (owner == "" || owner == info.Owner) {
			out = append(out, info)
		}
	}
	return out
}

// Record writes an audit entry for the principal of ctx.
func (u *Users) Record(ctx context.Context, action, thread, detail, remote string) {
	u.cfg.Authn.Record(ctx, PrincipalOf(ctx), action, thread, detail, remote)
}

// Watch calls end when the credentials the principal of ctx
// authenticated with are revoked (or their user deleted): a connection
// then ends at once, not at its next request. end is called on the
// goroutine that revoked them and must not block. The watch ends with
// ctx; the returned stop ends it too and waits for a call of end that
// is running. Call stop when the connection ends. An idle watch holds no
// goroutine (one connection each would be thousands).
func (u *Users) Watch(ctx context.Context, end func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	guarded := func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			end()
		}
	}
	unwatch := u.cfg.Authn.WatchFunc(PrincipalOf(ctx), guarded)
	if k := sessionOf(ctx); k != "" && u.cfg.Sessions != nil { // and the browser session's end (logout, expiry)
		unwatchKey, unwatchSession := unwatch, u.cfg.Sessions.WatchSession(k, guarded)
		unwatch = func() { unwatchKey(); unwatchSession() }
	}
	stopAfter := context.AfterFunc(ctx, unwatch)
	return func() {
		stopAfter()
		unwatch()
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}

// Recheck ends the watches of keys revoked or deleted elsewhere since
// (auth.Authenticator.Recheck: through another bridge on a shared store),
// and of browser sessions ended there (Config.Sessions): their
// connections end as if revoked here. It returns how many keys and
// sessions.
func (u *Users) Recheck(ctx context.Context) (int, error) {
	n, err := u.cfg.Authn.Recheck(ctx)
	if u.cfg.Sessions != nil {
		m, serr := u.cfg.Sessions.Recheck(ctx)
		n, err = n+m, errors.Join(err, serr)
	}
	return n, err
}

// quotaExceeded is the error of a request over the caller's limits.
func quotaExceeded(format string, args ...any) error {
	return wire.Error{Code: wire.CodeQuotaExceeded, Message: fmt.Sprintf(format, args...)}
}

// LimitsOf returns the limits that apply to the user of p: their own,
// else the bridge's defaults. Admins have none.
func (u *Users) LimitsOf(ctx context.Context, p auth.Principal) auth.Limits {
	if p.Admin {
		return auth.Limits{}
	}
	lim := u.cfg.Limits
	if usr, err := u.cfg.Authn.User(ctx, p.User); err == nil {
		if usr.Limits.Sandboxes > 0 {
			lim.Sandboxes = usr.Limits.Sandboxes
		}
		if usr.Limits.TokensPerDay > 0 {
			lim.TokensPerDay = usr.Limits.TokensPerDay
		}
	}
	return lim
}

// liveThreadsOf counts the threads of user that have a sandbox now.
func (u *Users) liveThreadsOf(ctx context.Context, user string) int {
	n := 0
	for _, id := range u.cfg.Threads.Live() {
		if owner, ok := u.cfg.Threads.Owner(ctx, id); ok && owner == user {
			n++
		}
	}
	return n
}

// CheckSandboxQuota refuses a new thread (a quota_exceeded wire.Error)
// when the user of ctx already runs as many sandboxes as their limit
// allows.
func (u *Users) CheckSandboxQuota(ctx context.Context) error {
	p := PrincipalOf(ctx)
	lim := u.LimitsOf(ctx, p)
	if lim.Sandboxes <= 0 {
		return nil
	}
	if n := u.liveThreadsOf(ctx, p.User); n >= lim.Sandboxes {
		return quotaExceeded("user %s runs %d sandboxes, the most allowed at a time (limit %d); delete or leave one first", p.User, n, lim.Sandboxes)
	}
	return nil
}

// boxOwner is the owner of the threads of sandbox box.
func (u *Users) boxOwner(box string) string {
	id := u.cfg.Threads.OfBox(box)
	if id == "" {
		return auth.AdminUser
	}
	return OwnerName(u.OwnerOf(context.Background(), id))
}

// principalOf is the principal of a stored user, for limits.
func (u *Users) principalOf(ctx context.Context, user string) auth.Principal {
	usr, err := u.cfg.Authn.User(ctx, user)
	return auth.Principal{User: user, Admin: err == nil && usr.Admin}
}

// AdmitModelCall refuses a model call of sandbox box when its owner's
// tokens for the day are spent (fleet.Config.LLMAdmit).
func (u *Users) AdmitModelCall(box string) error {
	ctx := context.Background()
	owner := u.boxOwner(box)
	lim := u.LimitsOf(ctx, u.principalOf(ctx, owner))
	if lim.TokensPerDay <= 0 {
		return nil
	}
	if used := u.tokens.add(owner, 0, time.Now()); used >= lim.TokensPerDay {
		return quotaExceeded("user %s used %d model tokens today, the most allowed a day (limit %d); the count starts again at 00:00 UTC", owner, used, lim.TokensPerDay)
	}
	return nil
}

// CountTokens adds a model call's tokens to its owner's day
// (fleet.Config.LLMUsage).
func (u *Users) CountTokens(box string, tokens int) {
	u.tokens.add(u.boxOwner(box), int64(tokens), time.Now())
}
