package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet/find"
	"github.com/boxwire/boxwire/bridge/fleet/greet"
	"github.com/boxwire/boxwire/bridge/fleet/warm"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A pooled sandbox's labels say so (find.LabelPool): its box id (p_…) is
// not its thread's id, and until a thread takes it no label, environment
// variable or socket names one (docs/pool.md). Only its agent knows the
// id its thread will have: the pool greets it under that id and keeps the
// connection open (greet.Held), so the claim is one round trip on it.

// errPoolStale ends the claim of a pooled sandbox whose image was rebuilt
// since it started (the claim's own look found it): the sandbox is removed
// and the thread gets a newer one.
var errPoolStale = errors.New("pooled sandbox runs an older build of its image")

// poolHost is the fleet as the warm pool's host (bridge/fleet/warm): it
// makes, starts and removes the pool's sandboxes, *Box records of
// f.boxes' kind that no thread has yet, and is the fleet's side of the
// pool besides: a new thread's claim of one (claim, take, bind) and the
// adoption of one an earlier run left (adopt). Its ...Locked methods run
// under f.mu, which guards the pool's books too.
type poolHost struct{ f *Fleet }

var _ warm.Host[*Box] = poolHost{}

// New makes the record of a pooled sandbox for key: a box id of its own
// (p_…), the thread scope, a lifetime from now; no I/O.
func (h poolHost) New(key warm.Key) (*Box, error) {
	f := h.f
	id, err := newBoxID("p_")
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	b := &Box{id: id, scope: wire.ScopeThread, image: key.Image, runtime: key.Runtime, created: now,
		expires: now.Add(f.cfg.MaxLifetime), idleTTL: f.cfg.IdleTTL, pooled: true,
		ready: make(chan struct{}), members: map[string]Member{}, res: &resources{runtime: key.Runtime}, px: f.px}
	close(b.ready)
	return b, nil
}

// Start creates b's sandbox and waits for its agent's hello (posture
// checked) under the id of the thread that will take it (NewThreadID),
// then holds that connection open (greet.Held) for the claim: the sandbox
// has no LLM token, no proxies and no thread until a thread takes it
// (poolHost.claim). It asks the engine, not only the books, whether there
// is room first: a thread's sandbox leaves f.boxes before its removal
// ends, and the pool must not take that room early.
func (h poolHost) Start(ctx context.Context, b *Box) (err error) {
	f := h.f
	if err := h.engineRoom(ctx); err != nil {
		return err
	}
	if b.res.dirs, err = f.cfg.Layout.Make(b.id); err != nil {
		return err
	}
	if err := f.px.PlaceCA(b.res.dirs); err != nil { // the agent reads it at start
		return err
	}
	spec := f.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := f.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.sandboxID = sb.ID
	f.rep.recordImage(ctx, b) // lifecycle.go: a rebuild of its image drains it (warm.Pool.DrainStale)
	thread := NewThreadID()
	conn, _, err := b.res.greet(ctx, f.greeter, thread, false) // no token until a thread takes it
	if err != nil {
		return err
	}
	b.held = f.greeter.Hold(conn, thread) // before the pool offers b: no lock needed
	return nil
}

// Remove removes b's sandbox, volume and folders, and ends the
// connection held for its claim.
func (h poolHost) Remove(ctx context.Context, b *Box) error {
	if b.held != nil { // the pool removes only sandboxes no thread took
		b.held.Close()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	return b.res.remove(cctx, h.f.cfg.Manager)
}

func (poolHost) ID(b *Box) string          { return b.id }
func (poolHost) Created(b *Box) time.Time  { return b.created }
func (h poolHost) LiveLocked() int         { return len(h.f.boxes) }
func (h poolHost) ClosedLocked() bool      { return h.f.closed }
func (h poolHost) StaleLocked(b *Box) bool { return h.f.roll.Stale(b.image, b.imageID) }

// engineRoom reports warm.ErrNoRoom when the engine runs MaxSandboxes
// of this bridge's sandboxes. It blocks for one List call.
func (h poolHost) engineRoom(ctx context.Context) error {
	f := h.f
	max := f.cfg.MaxSandboxes
	if max <= 0 {
		return nil
	}
	list, err := f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelOwner: f.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	if len(list) >= max {
		return warm.ErrNoRoom
	}
	return nil
}

// learnImage starts looking up what image names now, for a claim (a
// rebuild the reaper has not seen yet must not hand out the old build),
// when the manager can tell (sandbox.ImageResolver): one engine call, on
// a goroutine of its own, so that it runs beside the claim's binding. The
// returned wait blocks until what it found is learned (a failed lookup
// leaves what the last look found); the caller must call it.
func (h poolHost) learnImage(ctx context.Context, image string) (wait func()) {
	f := h.f
	res, ok := f.cfg.Manager.(sandbox.ImageResolver)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		id, err := res.ImageID(ctx, image)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.roll.Learn(map[string]string{image: id})
		f.mu.Unlock()
	}()
	return func() { <-done }
}

// staleBuild reports whether b, a pooled sandbox, runs an older build of
// its image than the one learned.
func (h poolHost) staleBuild(b *Box) bool {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.roll.Stale(b.image, b.imageID)
}

// poolLabels adds the pool's labels to l: boxwire.pool, and the thread
// once claimed (a replacement container of a claimed sandbox names it).
func poolLabels(b *Box, l map[string]string) {
	l[find.LabelPool] = "1"
	if b.thread != "" {
		l[sandbox.LabelThread] = b.thread
	}
}

// claim gives the new thread threadID ("": the id the sandbox's agent was
// greeted under, then b.thread) a ready pooled sandbox that matches o,
// bound to it (see bind), or returns nil when there is none (the caller
// creates one; the pool is asked to fill for o either way). A pooled
// sandbox that fails to bind is removed and the next one tried. It blocks
// for the claim's round trip(s), bounded by greet.HelloTimeout.
func (h poolHost) claim(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn) {
	f := h.f
	log := f.log
	if f.cfg.Pool <= 0 || o.scope != wire.ScopeThread {
		return nil, nil
	}
	learned := h.learnImage(ctx, o.image) // beside the first binding
	defer learned()
	for ctx.Err() == nil {
		start := time.Now()
		b, held := h.take(warm.Key{Image: o.image, Runtime: o.runtime}, threadID, o.idleTTL)
		if b == nil {
			f.pool.Wake()
			return nil, nil
		}
		log := log.With("thread", b.thread)
		f.rules.set(b, o.egress) // egress.go: the thread's rules, before its proxy serves
		conn, err := h.bind(ctx, b, held)
		if learned(); err == nil && h.staleBuild(b) { // the image was rebuilt: not this one
			conn.Close()
			err = errPoolStale
		}
		b.err = err
		close(b.ready)
		// The filler starts the next sandbox only once the thread has
		// started: a container's start takes both cores of a small host
		// for a while, and the claim (dial, hello, token) and the
		// client's hello waited behind it.
		time.AfterFunc(refillDelay, f.pool.Wake) // Wake never blocks
		if err == nil {
			log.Info("thread took a pooled sandbox", "box", b.id, "sandbox", b.res.sandbox(), "claim", time.Since(start))
			return b, conn
		}
		log.Warn("pooled sandbox could not be claimed; removing it", "box", b.id, "err", err)
		f.forgetBox(b)
		f.removeResources(ctx, b.res, log)
	}
	return nil, nil
}

// refillDelay is how long after a claim the filler is woken to replace
// the sandbox taken: more than the rest of the thread's start (a few ms).
const refillDelay = 50 * time.Millisecond

// take moves the oldest ready sandbox of key not on an older build
// into the fleet's boxes for threadID ("": the id its agent was greeted
// under), not ready until bound, and hands over the connection held for
// its claim (nil when it has none). The pool records the demand for key even
// when it has none; the caller wakes the filler.
func (h poolHost) take(key warm.Key, threadID string, idleTTL time.Duration) (*Box, *greet.Held) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil
	}
	if max := f.cfg.MaxSandboxes; max > 0 && len(f.boxes) >= max {
		f.pool.WantLocked(key)
		return nil, nil // acquireBox answers ErrLimit
	}
	// A sandbox on an older build of its image stays for the filler to
	// remove, and the thread gets a new one.
	b, ok := f.pool.TakeLocked(key, func(b *Box) bool { return !f.roll.Stale(b.image, b.imageID) })
	if !ok {
		return nil, nil
	}
	held := b.held
	b.held = nil
	switch {
	case threadID == "" && held != nil:
		threadID = held.Thread()
	case threadID == "":
		threadID = NewThreadID()
	}
	b.key = boxKey(wire.ScopeThread, threadID)
	b.thread, b.idleTTL, b.lastUsed = threadID, idleTTL, time.Now()
	b.joining = 1                 // until the thread's Started
	b.ready = make(chan struct{}) // closed by claimPooled once bound
	f.boxes[b.key] = b
	return b, held
}

// bind binds a taken pooled sandbox to its thread (b.thread): it serves
// the LLM and egress proxies in the sandbox's socket folder and claims the
// agent on held, greeted under the thread's id (greet.Held.Claim: one
// round trip) or, without it (none, another id, ended), on a new greeting
// with the claim right behind the hello (greet.Greeter.Claim). It returns
// the claimed connection; held is closed or given to it.
func (h poolHost) bind(ctx context.Context, b *Box, held *greet.Held) (*websocket.Conn, error) {
	f := h.f
	log := f.log.With("thread", b.thread)
	var err error
	if b.res.proxy, err = f.px.ServeLLM(b.res.dirs, log); err == nil {
		b.res.egress, err = f.px.ServeEgress(b.res.dirs, log)
	}
	if held != nil && (err != nil || held.Thread() != b.thread) {
		held.Close()
		held = nil
	}
	if err != nil {
		return nil, err
	}
	if held != nil {
		conn, err := held.Claim(ctx, b.id)
		if !errors.Is(err, greet.ErrHeldGone) {
			return conn, err
		}
		log.Info("the connection held for the claim ended; greeting the agent again", "box", b.id, "err", err)
	}
	ctx, cancel := context.WithTimeout(ctx, greet.HelloTimeout)
	defer cancel()
	return b.res.claim(ctx, f.greeter, b.thread)
}
