package fleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// heldCreate is the fake engine with Create held while hold is set, until
// release.
type heldCreate struct {
	*fakeManager
	mu      sync.Mutex
	held    chan struct{} // nil: Create goes through
	waiting chan struct{} // receives once a held Create waits
}

func (h *heldCreate) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held != nil {
		h.waiting <- struct{}{}
		select {
		case <-held:
		case <-ctx.Done():
			return sandbox.Sandbox{}, ctx.Err()
		}
	}
	return h.fakeManager.Create(ctx, spec)
}

// hold makes the next Creates wait; the returned func lets them go.
func (h *heldCreate) hold() (release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	h.held = ch
	return func() {
		h.mu.Lock()
		h.held = nil
		h.mu.Unlock()
		close(ch)
	}
}

// TestCounts: the fleet counts its sandboxes by state, as GET /metrics
// shows them: the warm pool's, a thread's being made, and running ones.
func TestCounts(t *testing.T) {
	t.Parallel()
	h := &heldCreate{waiting: make(chan struct{}, 1)}
	e := newFleet(t, func(c *fleet.Config) {
		h.fakeManager = c.Manager.(*fakeManager)
		c.Manager, c.Pool, c.ReapInterval = h, 1, time.Hour
	})
	want := func(what string, c fleet.Counts) {
		t.Helper()
		waitUntil(t, what, func() bool { return e.f.Counts() == c })
	}
	want("a pooled sandbox", fleet.Counts{Pool: 1})
	e.acquire("t1", wire.CreateThread{}) // takes the pooled one; the pool refills
	want("t1 running and the pool refilled", fleet.Counts{Running: 1, Pool: 1})

	release := h.hold()
	o, err := e.f.Options(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper"}) // never pooled
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, conn, err := e.f.Acquire(ctx, o, "t2")
		if err == nil {
			conn.Close()
			e.f.Started(b)
		}
		done <- err
	}()
	select {
	case <-h.waiting:
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("the assistant's sandbox was not created")
	}
	if got := e.f.Counts(); got != (fleet.Counts{Starting: 1, Running: 1, Pool: 1}) {
		t.Errorf("while t2's sandbox is made: %+v", got)
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acquire t2: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acquire t2 did not return")
	}
	want("t2's sandbox running", fleet.Counts{Running: 2, Pool: 1})
}
