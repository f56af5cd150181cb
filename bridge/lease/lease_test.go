package lease_test

import (
	"context"
	"errors"
	"path/filepath"
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
	st, err := store.Open(filepath.Join(t.TempDir(), "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	err = b.Acquire(ctx, "t_1")
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
