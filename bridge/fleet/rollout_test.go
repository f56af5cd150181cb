package fleet_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// imageManager is the fake manager with image ids: each reference names
// an id the test can change (a rebuild), and each sandbox remembers the id
// its reference named when it was made.
type imageManager struct {
	*fakeManager
	mu    sync.Mutex
	ids   map[string]string // reference → id now
	runs  map[string]string // sandbox id → image id
	stops []stopAt          // Stop calls, in order
}

type stopAt struct {
	id string
	at time.Time
}

var _ sandbox.ImageResolver = (*imageManager)(nil)

// withImages makes the fleet's manager an imageManager; ref names
// sha256:old until rebuilt.
func withImages(im *imageManager, edit func(*fleet.Config)) func(*fleet.Config) {
	return func(c *fleet.Config) {
		im.fakeManager = c.Manager.(*fakeManager)
		im.ids, im.runs = map[string]string{c.Image: "sha256:old"}, map[string]string{}
		c.Manager = im
		if edit != nil {
			edit(c)
		}
	}
}

func (m *imageManager) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := m.fakeManager.Create(ctx, spec)
	if err == nil {
		m.mu.Lock()
		m.runs[sb.ID] = m.ids[spec.Image]
		m.mu.Unlock()
	}
	return sb, err
}

func (m *imageManager) Stop(ctx context.Context, id string, grace time.Duration) error {
	m.mu.Lock()
	m.stops = append(m.stops, stopAt{id, time.Now()})
	m.mu.Unlock()
	return m.fakeManager.Stop(ctx, id, grace)
}

func (m *imageManager) ImageID(_ context.Context, ref string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.ids[ref]; ok {
		return id, nil
	}
	return "", sandbox.ErrImageNotFound
}

func (m *imageManager) SandboxImageID(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.runs[id]; ok {
		return v, nil
	}
	return "", sandbox.ErrNotFound
}

// rebuild makes ref name a new id.
func (m *imageManager) rebuild(ref, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids[ref] = id
}

func (m *imageManager) stopped() []stopAt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stops)
}

// worker is a member whose work the test switches on and off.
type worker struct {
	member
	busy atomic.Bool
}

func (w *worker) Working() bool { return w.busy.Load() }

// acquireWorker gives thread id a box and attaches a worker.
func (e *fleetEnv) acquireWorker(id string, req wire.CreateThread) (*fleet.Box, *worker) {
	e.t.Helper()
	w := &worker{member: member{id: id}}
	return e.acquireAs(id, req, w), w
}

// replaceStopped plays the member's part of a recycle: once the fleet
// stopped b's sandbox, the member asks why and replaces it.
func (e *fleetEnv) replaceStopped(b *fleet.Box, id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fleet.ReplaceTimeout)
	defer cancel()
	ev, known := e.f.LossCause(ctx, b, id)
	if !known || ev.Reason != wire.ExitImageUpdate {
		e.t.Fatalf("loss cause %+v (known %v), want image_update", ev, known)
	}
	sb, conn, err := e.f.Replace(ctx, b, id, ev)
	if err != nil {
		e.t.Fatal(err)
	}
	conn.Close()
	e.f.Linked(b, id, sb)
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Images names the default first, then the allowed ones, each once, and
// follows Images.Set.
func TestImagesListsTheAllowlist(t *testing.T) {
	t.Parallel()
	e := newFleet(t, func(c *fleet.Config) { c.Image, c.Images = "boxwire:latest", []string{"python:3.12", "boxwire:latest"} })
	if got := e.f.Images().List(); !slices.Equal(got, []string{"boxwire:latest", "python:3.12"}) {
		t.Fatalf("Images() = %q", got)
	}
	e.f.Images().Set([]string{"node:22"})
	if got := e.f.Images().List(); !slices.Equal(got, []string{"boxwire:latest", "node:22"}) {
		t.Fatalf("after Images.Set: %q", got)
	}
}

// The fleet knows the build each agent named in its hello.
func TestStatusNamesTheAgentBuild(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	b, _ := e.acquire("t1", wire.CreateThread{})
	if got := e.f.Status(b).Agent; got.Version != "fake-agent" {
		t.Fatalf("agent build %+v, want the fake agent's software name", got)
	}
}

// A rebuild drains the pool at once: a claim right after it (before any
// reaper tick) gets a sandbox of the new build, and the filler replaces
// the old pooled one.
func TestRolloutDrainsThePool(t *testing.T) {
	t.Parallel()
	im := &imageManager{}
	e := newFleet(t, withImages(im, func(c *fleet.Config) { c.Pool, c.ReapInterval = 1, time.Hour }))
	pooled := func(id string) bool {
		for _, u := range e.f.Images().Rollout().Images {
			if u.Pooled == 1 {
				for sb, run := range im.runs {
					if _, live := e.mgr.Live()[sb]; live && run == id {
						return true
					}
				}
			}
		}
		return false
	}
	waitUntil(t, "a pooled sandbox of the old build", func() bool { im.mu.Lock(); defer im.mu.Unlock(); return pooled("sha256:old") })
	im.rebuild("boxwire:test", "sha256:new")
	b, _ := e.acquire("t1", wire.CreateThread{})
	if got := e.f.Status(b).ImageID; got != "sha256:new" {
		t.Fatalf("the new thread runs %q, want the new build", got)
	}
	waitUntil(t, "the pool refilled with the new build only", func() bool {
		im.mu.Lock()
		defer im.mu.Unlock()
		for sb, run := range im.runs {
			if _, live := e.mgr.Live()[sb]; live && run == "sha256:old" {
				return false
			}
		}
		return pooled("sha256:new")
	})
}

// Live idle sandboxes move in batches, a working one only once its work
// ended, none while the rollout is paused.
func TestRolloutBatchesAndWaitsForWork(t *testing.T) {
	t.Parallel()
	im := &imageManager{}
	const interval, reapInterval = 400 * time.Millisecond, 20 * time.Millisecond
	e := newFleet(t, withImages(im, func(c *fleet.Config) {
		c.ReapInterval, c.Rollout = reapInterval, fleet.RolloutConfig{Batch: 1, Interval: interval, Paused: true}
	}))
	boxes := map[string]*fleet.Box{}
	workers := map[string]*worker{}
	for _, id := range []string{"t1", "t2", "t3"} {
		boxes[id], workers[id] = e.acquireWorker(id, wire.CreateThread{})
	}
	workers["t3"].busy.Store(true)
	im.rebuild("boxwire:test", "sha256:new")
	time.Sleep(3 * interval / 2)
	if s := im.stopped(); len(s) != 0 {
		t.Fatalf("paused rollout stopped %v", s)
	}
	if st := e.f.Images().Rollout(); !st.Paused || len(st.Images) != 1 || st.Images[0].Behind != 3 || st.Images[0].ImageID != "sha256:new" {
		t.Fatalf("rollout status %+v", st)
	}
	e.f.Images().Pause(false)
	byID := func(sb string) string {
		for id, b := range boxes {
			if b.SandboxID() == sb {
				return id
			}
		}
		return ""
	}
	for n := 1; n <= 2; n++ {
		waitUntil(t, "batch", func() bool { return len(im.stopped()) >= n })
		s := im.stopped()
		if len(s) != n {
			t.Fatalf("stops %v, want %d: one per batch", s, n)
		}
		id := byID(s[n-1].id)
		if id == "" || id == "t3" {
			t.Fatalf("stopped %s (thread %q): want an idle thread's sandbox", s[n-1].id, id)
		}
		e.replaceStopped(boxes[id], id)
		if got := e.f.Status(boxes[id]).ImageID; got != "sha256:new" {
			t.Fatalf("thread %s runs %s after its move", id, got)
		}
	}
	// The pace spaces the batches' decisions (pace.Rollout.Due's now, on a
	// reaper tick) at least interval apart; the manager sees each stop a
	// little after its decision, the first one's lag may be the longer,
	// so the stops may be closer by that difference (399.97 ms of 400 in
	// a make stress run). One reaper tick bounds it here.
	if s := im.stopped(); s[1].at.Sub(s[0].at) < interval-reapInterval {
		t.Fatalf("batches %v apart, want at least %v", s[1].at.Sub(s[0].at), interval-reapInterval)
	}
	time.Sleep(3 * interval / 2)
	if s := im.stopped(); len(s) != 2 {
		t.Fatalf("stops %v while t3 works", s)
	}
	workers["t3"].busy.Store(false)
	waitUntil(t, "the working thread's move once idle", func() bool { return len(im.stopped()) == 3 })
	e.replaceStopped(boxes["t3"], "t3")
	if st := e.f.Images().Rollout(); st.Images[0].Behind != 0 {
		t.Fatalf("rollout status %+v after the rollout", st)
	}
}

// Images.Move moves a box to another allowed image at once, whatever the
// rollout's pause, and names it in the threads' records; Images.Set
// changes what is allowed.
func TestMoveImage(t *testing.T) {
	t.Parallel()
	im := &imageManager{}
	e := newFleet(t, withImages(im, func(c *fleet.Config) {
		c.ReapInterval, c.Rollout = time.Hour, fleet.RolloutConfig{Paused: true}
	}))
	b, _ := e.acquireWorker("t1", wire.CreateThread{})
	if err := e.recs.Put(context.Background(), fleet.ThreadRecord{ID: "t1", Box: b.ID(), Scope: wire.ScopeThread, Image: "boxwire:test"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var werr wire.Error
	if _, _, err := e.f.Images().Move(ctx, b.ID(), "boxwire:other"); !errors.As(err, &werr) || werr.Code != wire.CodeNotAllowed {
		t.Fatalf("move to an image not allowed: %v", err)
	}
	e.f.Images().Set([]string{"boxwire:other"})
	im.rebuild("boxwire:other", "sha256:other")
	prev, ids, err := e.f.Images().Move(ctx, b.ID(), "boxwire:other")
	if err != nil || prev != "boxwire:test" || !slices.Equal(ids, []string{"t1"}) {
		t.Fatalf("move: %q %v %v", prev, ids, err)
	}
	if b.Image() != "boxwire:other" {
		t.Fatalf("box image %q", b.Image())
	}
	if rec, _, _ := e.recs.Get(ctx, "t1"); rec.Image != "boxwire:other" {
		t.Fatalf("record names %q", rec.Image)
	}
	waitUntil(t, "the old sandbox stopped", func() bool { return len(im.stopped()) == 1 })
	e.replaceStopped(b, "t1")
	if got := e.mgr.Live()[b.SandboxID()].Image; got != "boxwire:other" {
		t.Fatalf("new sandbox runs %q", got)
	}
	if got := e.f.Status(b).ImageID; got != "sha256:other" {
		t.Fatalf("image id %q after the move", got)
	}
	e.f.Images().Set(nil)
	if _, err := e.f.Options(wire.CreateThread{Image: "boxwire:other"}); err == nil {
		t.Fatal("an image taken off the allowlist is still allowed")
	}
}

// stopCounter is the fake manager without image ids (no
// sandbox.ImageResolver, like Kubernetes) that counts its Stop calls.
type stopCounter struct {
	*fakeManager
	stops atomic.Int32
}

func (m *stopCounter) Stop(ctx context.Context, id string, grace time.Duration) error {
	m.stops.Add(1)
	return m.fakeManager.Stop(ctx, id, grace)
}

// A box moved to another image while it works moves once its work ended,
// also with a manager that cannot resolve images (Kubernetes): the move
// does not wait for an image id that never comes.
func TestMoveImageOfABusyBoxWithoutResolver(t *testing.T) {
	t.Parallel()
	sc := &stopCounter{}
	e := newFleet(t, func(c *fleet.Config) {
		sc.fakeManager = c.Manager.(*fakeManager)
		c.Manager, c.ReapInterval, c.Images = sc, 20*time.Millisecond, []string{"boxwire:other"}
	})
	b, w := e.acquireWorker("t1", wire.CreateThread{})
	if err := e.recs.Put(context.Background(), fleet.ThreadRecord{ID: "t1", Box: b.ID(), Scope: wire.ScopeThread, Image: "boxwire:test"}); err != nil {
		t.Fatal(err)
	}
	w.busy.Store(true)
	if _, _, err := e.f.Images().Move(context.Background(), b.ID(), "boxwire:other"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := sc.stops.Load(); n != 0 {
		t.Fatalf("a working box was stopped %d times for its move", n)
	}
	w.busy.Store(false)
	waitUntil(t, "the move once idle", func() bool { return sc.stops.Load() == 1 })
	e.replaceStopped(b, "t1")
	if got := e.mgr.Live()[b.SandboxID()].Image; got != "boxwire:other" {
		t.Fatalf("new sandbox runs %q", got)
	}
}
