package retention_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/retention"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// pruner deletes the threads it is told to, except live ones.
type pruner struct {
	mu     sync.Mutex
	delete []string
	err    error
	calls  int
}

func (p *pruner) Prune(_ time.Time, live func(string) bool) (store.PruneStats, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return store.PruneStats{}, nil, p.err
	}
	var gone []string
	for _, id := range p.delete {
		if !live(id) {
			gone = append(gone, id)
		}
	}
	return store.PruneStats{Threads: len(gone)}, gone, nil
}

func (p *pruner) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// TestOnce: the volumes of the deleted threads' boxes go; a live thread,
// a thread without a box and one the store did not delete keep theirs;
// a failed prune drops nothing.
func TestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := recordstore.NewMem()
	for _, r := range []records.Thread{{ID: "t_old", Box: "b_old"}, {ID: "t_live", Box: "b_live"}, {ID: "t_nobox"}, {ID: "t_kept", Box: "b_kept"}} {
		if err := recs.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var dropped []string
	p := &pruner{delete: []string{"t_old", "t_live", "t_nobox"}}
	c := retention.Config{Retention: store.Retention{MaxAge: time.Hour}, Interval: time.Hour, Store: p, Records: recs,
		Live:       func(id string) bool { return id == "t_live" },
		DropVolume: func(_ context.Context, box string) error { dropped = append(dropped, box); return nil },
		Log:        slog.New(slog.DiscardHandler)}
	retention.Once(ctx, c, time.Now())
	if !slices.Equal(dropped, []string{"b_old"}) {
		t.Fatalf("dropped %v, want the deleted thread's box only", dropped)
	}
	p.err, dropped = errors.New("store gone"), nil
	retention.Once(ctx, c, time.Now())
	if len(dropped) != 0 {
		t.Fatalf("a failed prune dropped %v", dropped)
	}
}

// TestRun: nothing to keep out returns at once; otherwise it prunes each
// interval until its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	p := &pruner{}
	c := retention.Config{Interval: 5 * time.Millisecond, Store: p, Records: recordstore.NewMem(),
		Live: func(string) bool { return false }, DropVolume: func(context.Context, string) error { return nil },
		Log: slog.New(slog.DiscardHandler)}
	testutil.Within(t, "Run with nothing to keep out", 5*time.Second, func() bool { retention.Run(context.Background(), c); return true })
	if p.count() != 0 {
		t.Fatalf("pruned %d times with no retention", p.count())
	}
	c.Retention = store.Retention{MaxEvents: 10}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); retention.Run(ctx, c) }()
	testutil.Eventually(t, "three prunes", 5*time.Second, func() bool { return p.count() >= 3 })
	cancel()
	testutil.RequireClosed(t, "Run after its context ended", done, 5*time.Second)
}
