package records_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/wire"
)

func newBook(t *testing.T, recs ...records.Thread) records.Book {
	t.Helper()
	k := records.Book{Store: recordstore.NewMem(), Log: slog.New(slog.DiscardHandler)}
	for _, r := range recs {
		if err := k.Store.Put(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func TestBookSuspension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older, newer := t0.Add(-2*time.Hour), t0.Add(-time.Hour)
	k := newBook(t,
		records.Thread{ID: "a1", Box: "box1", Scope: wire.ScopeAssistant, Assistant: "ada", Suspended: &older},
		records.Thread{ID: "a2", Box: "box2", Scope: wire.ScopeAssistant, Assistant: "ada", Suspended: &newer},
		records.Thread{ID: "t1", Box: "t1", Scope: wire.ScopeThread, Created: t0},
	)
	if got := k.NewestSuspended(ctx, "ada"); got != "box2" {
		t.Fatalf("NewestSuspended = %q, want box2", got)
	}
	if got := k.NewestSuspended(ctx, "bob"); got != "" {
		t.Fatalf("NewestSuspended of nobody = %q", got)
	}
	// A box with a live thread is in use (its sandbox runs, maybe on
	// another bridge): not a suspended workspace to take back.
	if err := k.Store.Put(ctx, records.Thread{ID: "a3", Box: "box2", Scope: wire.ScopeAssistant, Assistant: "ada"}); err != nil {
		t.Fatal(err)
	}
	if got := k.NewestSuspended(ctx, "ada"); got != "box1" {
		t.Fatalf("NewestSuspended with box2 live = %q, want box1", got)
	}
	if err := k.Store.Delete(ctx, "a3"); err != nil {
		t.Fatal(err)
	}
	if exp, err := k.Expired(ctx, t0, 90*time.Minute); err != nil || len(exp) != 1 || exp[0].ID != "a1" {
		t.Fatalf("Expired = %v, %v; want a1", exp, err)
	}
	if err := k.MarkSuspended(ctx, "t1", nil, t0, wire.ExitIdle); err != nil {
		t.Fatal(err)
	}
	if r, ok := k.Suspended(ctx, "t1"); !ok || r.SuspendedFor != wire.ExitIdle || !r.Suspended.Equal(t0) {
		t.Fatalf("t1 after MarkSuspended: %+v %v", r, ok)
	}
	// A thread the store does not know is written only from fill.
	if err := k.MarkSuspended(ctx, "gone", nil, t0, wire.ExitIdle); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := k.Store.Get(ctx, "gone"); ok {
		t.Fatal("MarkSuspended without fill wrote a record")
	}
	if err := k.MarkSuspended(ctx, "new", &records.Thread{ID: "new", Box: "b9"}, t0, wire.ExitLifetime); err != nil {
		t.Fatal(err)
	}
	if r, ok := k.Suspended(ctx, "new"); !ok || r.Box != "b9" || r.SuspendedFor != wire.ExitLifetime {
		t.Fatalf("filled record %+v %v", r, ok)
	}
}

func TestBookBoxUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	k := newBook(t,
		records.Thread{ID: "x", Box: "shared", Scope: wire.ScopeAssistant, Image: "img:1"},
		records.Thread{ID: "y", Box: "shared", Scope: wire.ScopeAssistant, Image: "img:1", Suspended: &now},
		records.Thread{ID: "p", Box: "p_1", Scope: wire.ScopeThread},
	)
	if run, err := k.Running(ctx, "shared"); err != nil || len(run) != 1 || run[0].ID != "x" {
		t.Fatalf("Running = %v, %v; want x", run, err)
	}
	if r, ok, err := k.Taken(ctx, "p_1"); err != nil || !ok || r.ID != "p" {
		t.Fatalf("Taken = %v %v %v", r, ok, err)
	}
	if _, ok, _ := k.Taken(ctx, "shared"); ok {
		t.Fatal("an assistant's box taken as a pooled sandbox")
	}
	ids, prev, err := k.SetImage(ctx, "shared", "img:2", []string{"live"}, "")
	if err != nil || prev != "img:1" || !slices.Equal(ids, []string{"live", "x", "y"}) {
		t.Fatalf("SetImage = %v, %q, %v", ids, prev, err)
	}
	ids, err = k.SetEgress(ctx, "shared", []string{"example.com:443"}, nil)
	if err != nil || !slices.Equal(ids, []string{"x", "y"}) {
		t.Fatalf("SetEgress = %v, %v", ids, err)
	}
	for _, r := range k.OfBox(ctx, "shared") {
		if r.Image != "img:2" || !slices.Equal(r.Egress, []string{"example.com:443"}) {
			t.Fatalf("record %s: image %q egress %v", r.ID, r.Image, r.Egress)
		}
	}
	if used, err := k.UsesBox(ctx, "p_1"); err != nil || !used {
		t.Fatalf("UsesBox(p_1) = %v, %v", used, err)
	}
	if used, _ := k.UsesBox(ctx, "none"); used {
		t.Fatal("UsesBox of an unknown box")
	}
}
