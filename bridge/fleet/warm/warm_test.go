package warm_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/warm"
	"github.com/boxwire/boxwire/bridge/testutil"
)

const waitFor = 10 * time.Second

// box is a fake pooled sandbox.
type box struct {
	id      string
	created time.Time
	stale   bool
}

// host is a fake warm.Host: sandboxes in memory; Start blocks while hold
// is set (until it is closed or the start is given up).
type host struct {
	mu      sync.Mutex // the pool's lock as well (Config.Lock)
	n       int
	live    int
	closed  bool
	hold    chan struct{}
	started []string
	removed []string
}

func (h *host) New(warm.Key) (*box, error) {
	h.n++ // the filler is one goroutine
	return &box{id: fmt.Sprintf("p_%d", h.n), created: time.Now()}, nil
}

func (h *host) Start(ctx context.Context, b *box) error {
	h.mu.Lock()
	hold := h.hold
	h.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.mu.Lock()
	h.started = append(h.started, b.id)
	h.mu.Unlock()
	return nil
}

func (h *host) Remove(_ context.Context, b *box) error {
	h.mu.Lock()
	h.removed = append(h.removed, b.id)
	h.mu.Unlock()
	return nil
}

func (h *host) ID(b *box) string         { return b.id }
func (h *host) Created(b *box) time.Time { return b.created }
func (h *host) StaleLocked(b *box) bool  { return b.stale }
func (h *host) LiveLocked() int          { return h.live }
func (h *host) ClosedLocked() bool       { return h.closed }

func (h *host) removedIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.removed)
}

var key = warm.Key{Image: "img", Runtime: "runc"}

func newPool(t *testing.T, h *host, cfg warm.Config) *warm.Pool[*box] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Lock, cfg.Default = &h.mu, key
	if cfg.Tick == 0 {
		cfg.Tick = time.Hour
	}
	if cfg.Idle == 0 {
		cfg.Idle = time.Hour
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = time.Hour
	}
	p := warm.New(ctx, cfg, h)
	t.Cleanup(func() {
		cancel()
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return p
}

// readyCount is how many sandboxes of any key are ready.
func readyCount(h *host, p *warm.Pool[*box]) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	p.ReadyLocked(func(_ warm.Key, ready []*box) { n += len(ready) })
	return n
}

func awaitReady(t *testing.T, h *host, p *warm.Pool[*box], n int) {
	t.Helper()
	testutil.Until(t, fmt.Sprintf("%d ready", n), waitFor, func() error {
		if got := readyCount(h, p); got != n {
			return fmt.Errorf("%d ready", got)
		}
		return nil
	})
}

// The filler keeps Size ready of the default key; a take gets the oldest,
// which the pool no longer owns, and a wake refills; a stale one is not
// taken.
func TestPoolFillsTakesAndRefills(t *testing.T) {
	t.Parallel()
	h := &host{}
	p := newPool(t, h, warm.Config{Size: 2})
	awaitReady(t, h, p, 2)
	h.mu.Lock()
	b, ok := p.TakeLocked(key, func(*box) bool { return true })
	owned := p.OwnsLocked(b.id)
	h.mu.Unlock()
	if !ok || b.id != "p_1" || owned {
		t.Fatalf("took %+v (ok %v, still owned %v), want p_1, no longer the pool's", b, ok, owned)
	}
	p.Wake()
	awaitReady(t, h, p, 2)
	h.mu.Lock()
	if _, ok := p.TakeLocked(key, func(*box) bool { return false }); ok {
		t.Error("took a sandbox usable refused")
	}
	h.mu.Unlock()
}

// Under Max, room for a sandbox of the host's takes the oldest ready one
// out and removes it; with none ready, the start in progress is given up,
// its sandbox removed before the room is there.
func TestPoolMakesRoomUnderMax(t *testing.T) {
	t.Parallel()
	h := &host{}
	p := newPool(t, h, warm.Config{Size: 1, Max: 2})
	awaitReady(t, h, p, 1)

	h.mu.Lock()
	h.live = 1 // the host makes one: the books are full
	room := p.MakeRoomLocked()
	h.mu.Unlock()
	if err := room(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.removedIDs(); !slices.Equal(got, []string{"p_1"}) {
		t.Fatalf("removed %v, want the ready p_1", got)
	}

	h.mu.Lock()
	h.hold = make(chan struct{}) // the next start waits
	h.mu.Unlock()
	p.Wake()
	testutil.Until(t, "a start in progress", waitFor, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !p.OwnsLocked("p_2") {
			return fmt.Errorf("p_2 not started")
		}
		return nil
	})
	h.mu.Lock()
	h.live = 2
	room = p.MakeRoomLocked()
	h.mu.Unlock()
	if err := room(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.removedIDs(); !slices.Equal(got, []string{"p_1", "p_2"}) {
		t.Fatalf("removed %v, want p_2, given up, as well", got)
	}
	if p.Owns("p_2") || readyCount(h, p) != 0 {
		t.Fatal("the given-up sandbox is still the pool's")
	}
}

// Ready sandboxes on an older build go at DrainStale, and the pool refills.
func TestPoolDrainsStale(t *testing.T) {
	t.Parallel()
	h := &host{}
	p := newPool(t, h, warm.Config{Size: 1})
	awaitReady(t, h, p, 1)
	h.mu.Lock()
	p.ReadyLocked(func(_ warm.Key, ready []*box) { ready[0].stale = true })
	h.mu.Unlock()
	p.DrainStale()
	if got := h.removedIDs(); !slices.Equal(got, []string{"p_1"}) {
		t.Fatalf("removed %v, want the stale p_1", got)
	}
	awaitReady(t, h, p, 1)
}

// A key nobody wanted for Idle is emptied at the filler's next look.
func TestPoolEmptiesAnIdleKey(t *testing.T) {
	t.Parallel()
	h := &host{}
	p := newPool(t, h, warm.Config{Size: 1, Idle: 50 * time.Millisecond, Tick: 10 * time.Millisecond})
	testutil.Until(t, "the idle pool emptied", waitFor, func() error {
		if got := h.removedIDs(); len(got) == 0 || readyCount(h, p) != 0 {
			return fmt.Errorf("removed %v, %d ready", got, readyCount(h, p))
		}
		return nil
	})
}
