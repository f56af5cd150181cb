package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// User is a person or program with keys. Names are 1-64 letters, digits,
// '.', '_', '-' or '@'.
type User struct {
	Name    string    `json:"name"`
	Admin   bool      `json:"admin,omitempty"`
	Created time.Time `json:"created"`
	// Limits are the user's own limits; zero fields mean the bridge's
	// defaults.
	Limits Limits `json:"limits,omitzero"`
}

// Limits bound what one user may use. Zero means no bound (or the
// bridge's default, where the bridge has one).
type Limits struct {
	// Sandboxes is the most sandboxes the user's threads run at a time.
	Sandboxes int `json:"sandboxes,omitempty"`
	// TokensPerDay is the most model tokens the user's sandboxes may use in
	// a UTC day.
	TokensPerDay int64 `json:"tokens_per_day,omitempty"`
}

// Key is a stored API key: never its secret, only the secret's hash.
type Key struct {
	ID      string     `json:"id"`
	User    string     `json:"user"`
	Name    string     `json:"name,omitempty"`
	Hash    string     `json:"hash"` // hex SHA-256 of the secret
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Active reports whether k may be used at now.
func (k Key) Active(now time.Time) bool {
	return k.Revoked == nil && (k.Expires == nil || now.Before(*k.Expires))
}

// Principal is who a request comes from.
type Principal struct {
	// User is the user's name; AdminUser for the bridge's own token.
	User  string `json:"user"`
	Admin bool   `json:"admin"`
	// KeyID is the API key used ("" for the admin token and OIDC).
	KeyID string `json:"key_id,omitempty"`
	// Via says how: "token", "key" or "oidc".
	Via string `json:"via"`
}

// AdminUser is the user the bridge's own token (BOXWIRE_TOKEN) acts as. It
// owns the threads that existed before users did.
const AdminUser = "admin"

// Store keeps users, keys and the audit log. Implementations are safe for
// concurrent use. Missing users and keys are reported with ErrNotFound.
type Store interface {
	PutUser(ctx context.Context, u User) error
	User(ctx context.Context, name string) (User, error)
	Users(ctx context.Context) ([]User, error)
	// DeleteUser removes the user and every key of theirs.
	DeleteUser(ctx context.Context, name string) error
	PutKey(ctx context.Context, k Key) error
	Key(ctx context.Context, id string) (Key, error)
	// Keys lists the keys of user, or every key when user is "".
	Keys(ctx context.Context, user string) ([]Key, error)
	AppendAudit(ctx context.Context, e AuditEntry) error
	// Audit returns the entries that match f, oldest first.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// Errors callers test for with errors.Is.
var (
	// ErrNotFound means no such user or key.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized means the credentials are missing, wrong, expired
	// or revoked.
	ErrUnauthorized = errors.New("missing, wrong, expired or revoked credentials")
	// ErrTooManyFailures means the client's address failed too often of
	// late; it must wait.
	ErrTooManyFailures = errors.New("too many failed attempts from this address; wait and try again")
	// ErrExists means the user already exists.
	ErrExists = errors.New("already exists")
)

// Config configures an Authenticator.
type Config struct {
	// AdminToken is the bridge's own token; it acts as AdminUser. Required.
	AdminToken string
	// Store keeps users and keys; nil allows the admin token only.
	Store Store
	// OIDC, when set, also accepts JWTs from an issuer (oidc.go).
	OIDC *OIDCVerifier
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Failures bounds failed attempts per client address (limit.go); zero
	// values mean its defaults.
	Failures FailureLimit
}

// Authenticator checks credentials. See the package doc.
type Authenticator struct {
	cfg  Config
	log  *slog.Logger
	fail *failureLimiter

	mu       sync.Mutex
	watchers map[string]map[*watch]struct{} // by "key:<id>" and "user:<name>"
}

// New returns an Authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	if cfg.AdminToken == "" {
		return nil, errors.New("auth: the admin token is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authenticator{cfg: cfg, log: log, fail: newFailureLimiter(cfg.Failures, cfg.Now),
		watchers: map[string]map[*watch]struct{}{}}, nil
}

// Authenticate returns who r comes from, by its bearer credentials
// (Authorization: Bearer …). remote is the client's address (its host
// part counts failures). It fails with ErrTooManyFailures, without looking
// at the credentials, while the address is held back, and with an error
// wrapping ErrUnauthorized otherwise.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Principal, error) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		bearer = ""
	}
	return a.AuthenticateToken(ctx, r.RemoteAddr, strings.TrimSpace(bearer))
}

// AuthenticateToken is Authenticate for a credential given some other way
// (a login form exchanging a key for a cookie).
func (a *Authenticator) AuthenticateToken(ctx context.Context, remote, credential string) (Principal, error) {
	remote = clientAddr(remote)
	if !a.fail.allow(remote) {
		return Principal{}, ErrTooManyFailures
	}
	p, err := a.check(ctx, credential)
	if err != nil {
		a.fail.failed(remote)
		return Principal{}, err
	}
	return p, nil
}

func (a *Authenticator) check(ctx context.Context, cred string) (Principal, error) {
	if cred == "" {
		return Principal{}, fmt.Errorf("%w: no bearer credentials", ErrUnauthorized)
	}
	if subtle.ConstantTimeCompare([]byte(cred), []byte(a.cfg.AdminToken)) == 1 {
		return Principal{User: AdminUser, Admin: true, Via: "token"}, nil
	}
	if strings.HasPrefix(cred, KeyPrefix) {
		return a.checkKey(ctx, cred)
	}
	if a.cfg.OIDC != nil && strings.Count(cred, ".") == 2 {
		return a.checkJWT(ctx, cred)
	}
	return Principal{}, ErrUnauthorized
}

// checkKey looks the key up by its id and compares the secret's hash in
// constant time. An unknown id costs the same hash and compare.
func (a *Authenticator) checkKey(ctx context.Context, cred string) (Principal, error) {
	id, secret, err := ParseKey(cred)
	if err != nil || a.cfg.Store == nil {
		return Principal{}, ErrUnauthorized
	}
	k, kerr := a.cfg.Store.Key(ctx, id)
	want := k.Hash
	if kerr != nil {
		want = strings.Repeat("0", 64)
	}
	match := subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(want)) == 1
	if kerr != nil || !match || !k.Active(a.cfg.Now()) {
		return Principal{}, ErrUnauthorized
	}
	u, err := a.cfg.Store.User(ctx, k.User)
	if err != nil {
		return Principal{}, ErrUnauthorized // the user is gone
	}
	return Principal{User: u.Name, Admin: u.Admin, KeyID: k.ID, Via: "key"}, nil
}

// clientAddr is the host part of a remote address.
func clientAddr(remote string) string {
	if i := strings.LastIndexByte(remote, ':'); i > 0 && !strings.HasSuffix(remote, "]") {
		return strings.Trim(remote[:i], "[]")
	}
	return strings.Trim(remote, "[]")
}

// ValidName reports whether name may name a user.
func ValidName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)
		if !ok {
			return false
		}
	}
	return true
}
