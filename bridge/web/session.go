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

// sessionTable holds the live sessions by the SHA-256 of their cookie
// value, and keeps them in a file (when it has one) so that a bridge
// restart does not log the browsers out: the file holds no cookie value,
// only its hash. It starts no goroutines: a session's revocation is seen
// when it is next used, and dead sessions are swept at each login. Safe
// for concurrent use.
type sessionTable struct {
	file string // "" keeps them in memory only
	log  *slog.Logger
	mu   sync.Mutex
	m    map[string]*session
}

// sessionKey is the table's key for a cookie value.
func sessionKey(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// get returns the live session of cookie; a dead one is forgotten.
func (st *sessionTable) get(cookie string, now time.Time) (*session, bool) {
	k := sessionKey(cookie)
	st.mu.Lock()
	defer st.mu.Unlock()
	ss := st.m[k]
	if ss == nil {
		return nil, false
	}
	if !ss.live(now) {
		st.dropLocked(k)
		st.saveLocked()
		return nil, false
	}
	return ss, true
}

// add keeps ss under a new random cookie value, which it returns,
// sweeping dead sessions (and the oldest, when full) first.
func (st *sessionTable) add(ss *session, now time.Time) string {
	cookie := randomHex(32)
	st.mu.Lock()
	defer st.mu.Unlock()
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
	st.m[sessionKey(cookie)] = ss
	st.saveLocked()
	return cookie
}

// drop forgets the session of cookie (logout).
func (st *sessionTable) drop(cookie string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropLocked(sessionKey(cookie))
	st.saveLocked()
}

func (st *sessionTable) dropLocked(k string) {
	if ss := st.m[k]; ss != nil {
		ss.unwatch()
		delete(st.m, k)
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
