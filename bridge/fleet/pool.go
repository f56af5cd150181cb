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
// variable or socket names one (docs/pool.md).

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
// checked), then closes that connection: the sandbox has no LLM token, no
// proxies and no thread until a thread takes it (poolHost.claim). It asks
// the engine, not only the books, whether there is room first: a
// thread's sandbox leaves f.boxes before its removal ends, and the pool
// must not take that room early.
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
	f.rep.recordImage(ctx, b)                                // lifecycle.go: a rebuild of its image drains it (warm.Pool.DrainStale)
	conn, _, err := b.res.greet(ctx, f.greeter, b.id, false) // no token until a thread takes it
	if err != nil {
		return err
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "pooled"), time.Now().Add(greet.WriteWait))
	conn.Close()
	return nil
}

// Remove removes b's sandbox, volume and folders.
func (h poolHost) Remove(ctx context.Context, b *Box) error {
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

// claim gives the new thread threadID a ready pooled sandbox that
// matches o, bound to it (see bind), or returns nil when there is
// none (the caller creates one; the pool is asked to fill for o either
// way). A pooled sandbox that fails to bind is removed and the next one
// tried. It blocks for the claim's round trips, bounded by greet.HelloTimeout.
func (h poolHost) claim(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn) {
	f := h.f
	log := f.log.With("thread", threadID)
	if f.cfg.Pool <= 0 || o.scope != wire.ScopeThread {
		return nil, nil
	}
	learned := h.learnImage(ctx, o.image) // beside the first binding
	defer learned()
	for ctx.Err() == nil {
		start := time.Now()
		b := h.take(warm.Key{Image: o.image, Runtime: o.runtime}, threadID, o.idleTTL)
		if b == nil {
			f.pool.Wake()
			return nil, nil
		}
		f.rules.set(b, o.egress) // egress.go: the thread's rules, before its proxy serves
		conn, err := h.bind(ctx, b, threadID)
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
// into the fleet's boxes for threadID, not ready until bound. The pool
// records the demand for key even when it has none; the caller wakes
// the filler.
func (h poolHost) take(key warm.Key, threadID string, idleTTL time.Duration) *Box {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if max := f.cfg.MaxSandboxes; max > 0 && len(f.boxes) >= max {
		f.pool.WantLocked(key)
		return nil // acquireBox answers ErrLimit
	}
	// A sandbox on an older build of its image stays for the filler to
	// remove, and the thread gets a new one.
	b, ok := f.pool.TakeLocked(key, func(b *Box) bool { return !f.roll.Stale(b.image, b.imageID) })
	if !ok {
		return nil
	}
	b.key = boxKey(wire.ScopeThread, threadID)
	b.thread, b.idleTTL, b.lastUsed = threadID, idleTTL, time.Now()
	b.joining = 1                 // until the thread's Started
	b.ready = make(chan struct{}) // closed by claimPooled once bound
	f.boxes[b.key] = b
	return b
}

// bind binds a taken pooled sandbox to threadID: it serves the LLM
// and egress proxies in the sandbox's own socket folder, greets the agent
// with the thread's id and sends the claim with the LLM token right
// behind the hello (greet.Greeter.Claim: the pool's greeting checked this
// agent's posture). It returns the greeted connection.
func (h poolHost) bind(ctx context.Context, b *Box, threadID string) (conn *websocket.Conn, err error) {
	f := h.f
	log := f.log.With("thread", threadID)
	if b.res.proxy, err = f.px.ServeLLM(b.res.dirs, log); err != nil {
		return nil, err
	}
	if b.res.egress, err = f.px.ServeEgress(b.res.dirs, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, greet.HelloTimeout)
	defer cancel()
	return b.res.claim(ctx, f.greeter, threadID)
}
