package auth_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/store"
)

const adminToken = "tok-admin-test"

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newAuth(t *testing.T, mod func(*auth.Config)) (*auth.Authenticator, auth.Store, *clock) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	cfg := auth.Config{AdminToken: adminToken, Store: st.Accounts(), Now: c.Now}
	if mod != nil {
		mod(&cfg)
	}
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, st.Accounts(), c
}

func request(remote, bearer string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/v1/threads", nil)
	r.RemoteAddr = remote
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	return r
}

// TestKeyLifecycle: a created key authenticates as its user until it is
// revoked or expires; only its hash is stored; the admin token is admin.
func TestKeyLifecycle(t *testing.T) {
	a, st, c := newAuth(t, nil)
	ctx := context.Background()
	if _, err := a.AddUser(ctx, "alice", false, auth.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddUser(ctx, "alice", false, auth.Limits{}); !errors.Is(err, auth.ErrExists) {
		t.Fatalf("second add: %v", err)
	}
	key, stored, err := a.CreateKey(ctx, "alice", "laptop", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "bwk_"+stored.ID+"_") || len(key) != len("bwk_")+12+1+64 {
		t.Fatalf("key %q (id %s)", key, stored.ID)
	}
	got, _ := st.Key(ctx, stored.ID)
	if strings.Contains(got.Hash, strings.Split(key, "_")[2]) || got.Hash == "" {
		t.Fatalf("the secret is stored: %+v", got)
	}
	p, err := a.Authenticate(ctx, request("10.0.0.1:5000", key))
	if err != nil || p.User != "alice" || p.Admin || p.KeyID != stored.ID || p.Via != "key" {
		t.Fatalf("alice's key: %+v %v", p, err)
	}
	if p, err := a.Authenticate(ctx, request("10.0.0.1:5000", adminToken)); err != nil || p.User != auth.AdminUser || !p.Admin {
		t.Fatalf("admin token: %+v %v", p, err)
	}
	flipped := key[:len(key)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(key, "0")]
	for _, bad := range []string{"", "nope", flipped, "bwk_" + stored.ID + "_" + strings.Repeat("a", 64), "bwk_000000000000_" + strings.Repeat("a", 64)} {
		if _, err := a.Authenticate(ctx, request("10.0.0.2:1", bad)); !errors.Is(err, auth.ErrUnauthorized) {
			t.Errorf("credential %q: %v, want unauthorized", bad, err)
		}
	}
	c.add(2 * time.Hour)
	if _, err := a.Authenticate(ctx, request("10.0.0.1:5000", key)); !errors.Is(err, auth.ErrUnauthorized) {
		t.Fatalf("expired key: %v", err)
	}
	key2, k2, _ := a.CreateKey(ctx, "alice", "ci", 0)
	gone, stop := a.Watch(auth.Principal{User: "alice", KeyID: k2.ID})
	defer stop()
	if _, err := a.RevokeKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("a watch of the revoked key was not told")
	}
	if _, err := a.Authenticate(ctx, request("10.0.0.1:5000", key2)); !errors.Is(err, auth.ErrUnauthorized) {
		t.Fatalf("revoked key: %v", err)
	}
}

// TestDeleteUserEndsTheirConnections: deleting a user removes their keys
// and tells every watch of theirs.
func TestDeleteUserEndsTheirConnections(t *testing.T) {
	a, st, _ := newAuth(t, nil)
	ctx := context.Background()
	a.AddUser(ctx, "bob", false, auth.Limits{})
	key, k, _ := a.CreateKey(ctx, "bob", "", 0)
	p, err := a.Authenticate(ctx, request("10.0.0.3:1", key))
	if err != nil {
		t.Fatal(err)
	}
	gone, stop := a.Watch(p)
	defer stop()
	if err := a.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("bob's connection was not told")
	}
	if _, err := st.Key(ctx, k.ID); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("bob's key left: %v", err)
	}
	if _, err := a.Authenticate(ctx, request("10.0.0.3:1", key)); !errors.Is(err, auth.ErrUnauthorized) {
		t.Fatalf("deleted user's key: %v", err)
	}
}

// TestBruteForceHeldBackPerAddress: one address that keeps guessing is
// refused without a check; another address and the right key from it are
// not slowed; the hold ends with the window.
func TestBruteForceHeldBackPerAddress(t *testing.T) {
	a, _, c := newAuth(t, func(cfg *auth.Config) { cfg.Failures = auth.FailureLimit{Max: 5, Window: time.Minute} })
	ctx := context.Background()
	for i := range 5 {
		if _, err := a.Authenticate(ctx, request("192.0.2.9:1000", "guess")); !errors.Is(err, auth.ErrUnauthorized) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, err := a.Authenticate(ctx, request("192.0.2.9:1001", adminToken)); !errors.Is(err, auth.ErrTooManyFailures) {
		t.Fatalf("held-back address: %v, want too many failures", err)
	}
	if _, err := a.Authenticate(ctx, request("198.51.100.1:1", adminToken)); err != nil {
		t.Fatalf("another address: %v", err)
	}
	c.add(time.Minute)
	if _, err := a.Authenticate(ctx, request("192.0.2.9:1002", adminToken)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestAuditLog: entries are kept in order and filtered.
func TestAuditLog(t *testing.T) {
	a, _, c := newAuth(t, nil)
	ctx := context.Background()
	alice := auth.Principal{User: "alice", KeyID: "k1"}
	a.Record(ctx, alice, "thread.create", "t_1", "", "10.0.0.1:5")
	c.add(time.Second)
	a.Record(ctx, auth.Principal{User: "bob"}, "thread.delete", "t_2", "", "")
	c.add(time.Second)
	a.Record(ctx, alice, "files.download", "t_1", "/workspace/x", "")
	all, _ := a.Audit(ctx, auth.AuditFilter{})
	if len(all) != 3 || all[0].Action != "thread.create" || all[0].Remote != "10.0.0.1" || all[2].Detail != "/workspace/x" {
		t.Fatalf("audit %+v", all)
	}
	if got, _ := a.Audit(ctx, auth.AuditFilter{User: "alice", Thread: "t_1"}); len(got) != 2 {
		t.Fatalf("alice's: %+v", got)
	}
	if got, _ := a.Audit(ctx, auth.AuditFilter{Limit: 1}); len(got) != 1 || got[0].Action != "files.download" {
		t.Fatalf("newest: %+v", got)
	}
}
