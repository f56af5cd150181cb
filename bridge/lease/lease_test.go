package lease_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestBook: one bridge's thread lease refuses another bridge with a
// RelayedError naming the holder (and fleet.ErrRelayedElsewhere), Foreign
// tells whose each lease is, and a second process with the same bridge id
// is refused.
func TestBook(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	a, b := lease.New(st, "bridge-a", time.Minute, nil), lease.New(st, "bridge-b", time.Minute, nil)
	if err := a.ClaimBridge(ctx); err != nil {
		t.Fatalf("claim bridge-a: %v", err)
	}
	if err := lease.New(st, "bridge-a", time.Second, nil).ClaimBridge(ctx); !errors.Is(err, lease.ErrBridgeIDInUse) {
		t.Fatalf("a second bridge-a: %v, want ErrBridgeIDInUse", err)
	}
	if err := a.Acquire(ctx, "t_1"); err != nil {
		t.Fatalf("a acquires t_1: %v", err)
	}
	err := b.Acquire(ctx, "t_1")
	var re lease.RelayedError
	var werr wire.Error
	if !errors.As(err, &re) || re.Holder != "bridge-a" || !errors.Is(err, fleet.ErrRelayedElsewhere) ||
		!errors.As(err, &werr) || werr.Code != wire.CodeSandboxUnavailable {
		t.Fatalf("b acquires a's t_1: %v, want a RelayedError held by bridge-a", err)
	}
	if !a.Holds("t_1") || b.Holds("t_1") {
		t.Fatalf("holds: a %v b %v", a.Holds("t_1"), b.Holds("t_1"))
	}
	foreign, err := b.Foreign(ctx)
	if err != nil || !foreign["t_1"] {
		t.Fatalf("b's foreign leases %v (%v): t_1 should be another's", foreign, err)
	}
	if mine, _ := a.Foreign(ctx); mine["t_1"] {
		t.Fatal("a sees its own lease of t_1 as foreign")
	}
}

// flaky is a store whose lease calls fail while down is set.
type flaky struct {
	*store.Store
	down atomic.Bool
}

var errDown = errors.New("store down")

func (f *flaky) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (store.Lease, error) {
	if f.down.Load() {
		return store.Lease{}, errDown
	}
	return f.Store.AcquireLease(ctx, thread, holder, ttl)
}

func (f *flaky) Bridges(ctx context.Context) ([]store.Bridge, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.Bridges(ctx)
}

// TestOverdue: a thread's lease is overdue once no renewal the store
// answered began within the ttl, and not after the store answers again;
// the other bridges' addresses are kept from the last renewal answered.
func TestOverdue(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f := &flaky{Store: st}
	const ttl = 300 * time.Millisecond
	b := lease.New(f, "bridge-a", ttl, nil)
	if err := st.PutBridge(ctx, store.Bridge{ID: "bridge-b", Address: "http://b:1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, "t_1"); err != nil {
		t.Fatal(err)
	}
	b.Renew(ctx, []string{"t_1"})
	if got := b.Peers(); len(got) != 1 || got[0] != "http://b:1" {
		t.Fatalf("peers %v", got)
	}
	f.down.Store(true)
	if lost := b.Renew(ctx, []string{"t_1"}); len(lost) != 0 || len(b.Overdue([]string{"t_1"})) != 0 {
		t.Fatalf("right after the store went away: lost %v, overdue %v", lost, b.Overdue([]string{"t_1"}))
	}
	time.Sleep(ttl + 50*time.Millisecond)
	b.Renew(ctx, []string{"t_1"})
	if got := b.Overdue([]string{"t_1", "t_2"}); len(got) != 1 || got[0] != "t_1" {
		t.Fatalf("overdue after the ttl %v, want [t_1]", got)
	}
	if got := b.Peers(); len(got) != 1 {
		t.Fatalf("peers while the store is away %v", got)
	}
	f.down.Store(false)
	b.Renew(ctx, []string{"t_1"})
	if got := b.Overdue([]string{"t_1"}); len(got) != 0 {
		t.Fatalf("overdue once the store renewed it %v", got)
	}
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
