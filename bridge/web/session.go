package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
)

// maxSessions bounds the sessions kept; past it the oldest goes.
const maxSessions = 10000

// session is one browser login.
type session struct {
	P       auth.Principal `json:"principal"`
	CSRF    string         `json:"csrf"`
	Created time.Time      `json:"created"`
	Expires time.Time      `json:"expires"`
	// TokenHash is, for a login with the admin token, the hash of that
	// token: a session kept across a restart survives only while the
	// bridge's token is the same.
	TokenHash string `json:"token_hash,omitempty"`

	gone    <-chan struct{} // closed when the credentials are revoked
	unwatch func()
	checked time.Time // when it was last read from the shared store (sessionTable.shared)

	// Under the table's lock: the connections the session opened that end
	// with it (WatchSession), and whether it ended.
	watchers  map[int]func()
	nextWatch int
	ended     bool
}

// endLocked marks ss ended and tells its watchers; with the table's lock
// held (a watcher must not block).
func (ss *session) endLocked() {
	ss.ended = true
	for _, end := range ss.watchers {
		end()
	}
	ss.watchers = nil
}

// live reports whether ss may be used at now.
func (ss *session) live(now time.Time) bool {
	select {
	case <-ss.gone:
		return false
	default:
		return now.Before(ss.Expires)
	}
}

// SharedSessions keeps browser sessions where every bridge on a shared
// store reads them (pgstore.Store), by the SHA-256 of their cookie value
// (never the value). With it a login through one bridge is a session on
// all of them — a load balancer may send a browser's next request to any,
// and a bridge that passes a request on to the thread's relay sends the
// cookie along — and a logout through any ends it on all within
// sharedRecheck. The data is the session as this package encodes it.
type SharedSessions interface {
	PutWebSession(ctx context.Context, key string, data []byte, expires time.Time) error
	WebSession(ctx context.Context, key string) (data []byte, ok bool, err error)
	DeleteWebSession(ctx context.Context, key string) error
}

// sharedRecheck is how long a bridge uses a shared session it read
// before it reads it again: a logout through another bridge is seen
// within it.
const sharedRecheck = time.Second

// sessionTable holds the live sessions by the SHA-256 of their cookie
// value, and keeps them in a file (when it has one) so that a bridge
// restart does not log the browsers out: the file holds no cookie value,
// only its hash. With a shared store the sessions are kept there instead
// of in a file, and the table is this bridge's cache of them. It starts
// no goroutines: a session's revocation is seen when it is next used, and
// dead sessions are swept at each login. Safe for concurrent use.
type sessionTable struct {
	file   string         // "" keeps them in memory only
	shared SharedSessions // nil: this bridge's alone
	log    *slog.Logger
	mu     sync.Mutex
	m      map[string]*session
}

// sessionKey is the table's key for a cookie value.
func sessionKey(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// get returns the live session of cookie; a dead one is forgotten. With
// a shared store, a session not read from it for sharedRecheck is read
// again (it may have ended through another bridge), and one this bridge
// does not know is looked up there and checked as a restored one is
// (stillValid); a store that cannot be read refuses the cookie.
func (st *sessionTable) get(ctx context.Context, cfg *Config, cookie string, now time.Time) (*session, bool) {
	k := sessionKey(cookie)
	st.mu.Lock()
	ss := st.m[k]
	if ss != nil && !ss.live(now) {
		st.dropLocked(k)
		st.saveLocked()
		st.mu.Unlock()
		return nil, false
	}
	if ss != nil && (st.shared == nil || now.Sub(ss.checked) < sharedRecheck) {
		st.mu.Unlock()
		return ss, true
	}
	st.mu.Unlock()
	if st.shared == nil {
		return nil, false
	}
	data, ok, err := st.shared.WebSession(ctx, k)
	if err != nil {
		st.log.Warn("read a browser session from the store", "err", err)
		return nil, false
	}
	if cur, known := st.recheck(k, ok, now); known || !ok {
		return cur, known
	}
	// A session made through another bridge: checked outside the lock
	// (the check reads the store).
	got := &session{}
	if err := json.Unmarshal(data, got); err != nil || !now.Before(got.Expires) || !cfg.stillValid(ctx, got, now) {
		return nil, false
	}
	got.checked = now
	got.gone, got.unwatch = cfg.Auth.Watch(got.P)
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur := st.m[k]; cur != nil { // another request took it in meanwhile
		got.unwatch()
		return cur, true
	}
	st.makeRoomLocked(now)
	st.m[k] = got
	return got, true
}

// recheck applies what the shared store said of the session under k
// (there: inStore) to the one this bridge holds, if any: it is dropped
// when the store has it no more, else marked checked at now and returned
// (known).
func (st *sessionTable) recheck(k string, inStore bool, now time.Time) (ss *session, known bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.m[k]
	switch {
	case cur == nil:
		return nil, false
	case !inStore: // ended through another bridge
		st.dropLocked(k)
		return nil, false
	}
	cur.checked = now
	return cur, true
}

// add keeps ss under a new random cookie value, which it returns,
// sweeping dead sessions (and the oldest, when full) first. With a shared
// store it is kept there first: a login that cannot be shared fails (the
// next bridge to see the cookie would not know it).
func (st *sessionTable) add(ctx context.Context, ss *session, now time.Time) (string, error) {
	cookie := randomHex(32)
	k := sessionKey(cookie)
	if st.shared != nil {
		data, err := json.Marshal(ss)
		if err == nil {
			err = st.shared.PutWebSession(ctx, k, data, ss.Expires)
		}
		if err != nil {
			return "", fmt.Errorf("keep the session in the store: %w", err)
		}
		ss.checked = now
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.makeRoomLocked(now)
	st.m[k] = ss
	st.saveLocked()
	return cookie, nil
}

// makeRoomLocked sweeps dead sessions, and the oldest when the table is
// full. Called with st.mu held.
func (st *sessionTable) makeRoomLocked(now time.Time) {
	var oldest string
	for k, v := range st.m {
		if !v.live(now) {
			st.dropLocked(k)
		} else if oldest == "" || v.Created.Before(st.m[oldest].Created) {
			oldest = k
		}
	}
	if len(st.m) >= maxSessions && oldest != "" {
		st.dropLocked(oldest)
	}
}

// drop forgets the session of cookie (logout), in the shared store too.
func (st *sessionTable) drop(ctx context.Context, cookie string) error {
	k := sessionKey(cookie)
	if st.shared != nil {
		if err := st.shared.DeleteWebSession(ctx, k); err != nil {
			return fmt.Errorf("end the session in the store: %w", err)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropLocked(k)
	st.saveLocked()
	return nil
}

// dropLocked forgets the session under k, ending the connections it
// opened. Called with st.mu held.
func (st *sessionTable) dropLocked(k string) {
	if ss := st.m[k]; ss != nil {
		ss.unwatch()
		ss.endLocked()
		delete(st.m, k)
	}
}

// expire forgets ss, the session under k, when it is still there: its
// expiry came (a connection's watch, WatchSession).
func (st *sessionTable) expire(k string, ss *session) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m[k] == ss {
		st.dropLocked(k)
		st.saveLocked()
	}
}

// closeAll stops watching every session; the file keeps them for the
// next start.
func (st *sessionTable) closeAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, ss := range st.m {
		ss.unwatch()
	}
	st.m = map[string]*session{}
}

// saveLocked writes the table to its file. A failure only costs the
// sessions at the next restart, so it is reported to the log, not to the
// request.
func (st *sessionTable) saveLocked() {
	if err := st.writeLocked(); err != nil {
		st.log.Warn("keep browser sessions", "err", err)
	}
}

// writeLocked writes the table to its file (a temporary file renamed into
// place, mode 0600).
func (st *sessionTable) writeLocked() error {
	if st.file == "" {
		return nil
	}
	data, err := json.Marshal(st.m)
	if err != nil {
		return fmt.Errorf("encode sessions: %w", err)
	}
	tmp := st.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write sessions: %w", err)
	}
	if err := os.Rename(tmp, st.file); err != nil {
		return fmt.Errorf("write sessions: %w", err)
	}
	return nil
}

// load reads the sessions an earlier run kept and restores those that
// are still good: not expired, and their credentials still valid (the
// key active and its user there, the admin token unchanged, an OIDC
// user not deleted). Each restored session is watched again.
func (st *sessionTable) load(ctx context.Context, cfg *Config, now time.Time) error {
	if st.file == "" {
		return nil
	}
	data, err := os.ReadFile(st.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	var kept map[string]*session
	if err := json.Unmarshal(data, &kept); err != nil {
		return fmt.Errorf("read sessions %s: %w", st.file, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, ss := range kept {
		if ss == nil || !now.Before(ss.Expires) || !cfg.stillValid(ctx, ss, now) {
			continue
		}
		ss.gone, ss.unwatch = cfg.Auth.Watch(ss.P)
		st.m[k] = ss
	}
	st.saveLocked()
	return nil
}

// stillValid reports whether the credentials behind a kept session would
// still be accepted.
func (cfg *Config) stillValid(ctx context.Context, ss *session, now time.Time) bool {
	switch ss.P.Via {
	case "token":
		return ss.TokenHash != "" && ss.TokenHash == tokenHash(cfg.AdminToken)
	case "key":
		if cfg.Store == nil {
			return false
		}
		k, err := cfg.Store.Key(ctx, ss.P.KeyID)
		if err != nil || !k.Active(now) {
			return false
		}
		_, err = cfg.Store.User(ctx, k.User)
		return err == nil
	default: // oidc: the user must still be there when the store keeps users
		if cfg.Store == nil {
			return true
		}
		_, err := cfg.Store.User(ctx, ss.P.User)
		return err == nil
	}
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte("boxwire-session-token\x00" + token))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// SessionsFile is where New keeps the sessions in a bridge's data folder.
func SessionsFile(dataDir string) string { return filepath.Join(dataDir, "web-sessions.json") }
