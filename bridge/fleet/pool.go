package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet/greet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// labelPool marks a sandbox started for the warm pool: its box id (p_…) is
// not its thread's id, and until a thread takes it no label, environment
// variable or socket names one (docs/pool.md).
const labelPool = "boxwire.pool"

// errPoolStale ends the claim of a pooled sandbox whose image was rebuilt
// since it started (the claim's own look found it): the sandbox is removed
// and the thread gets a newer one.
var errPoolStale = errors.New("pooled sandbox runs an older build of its image")

// poolRetry is the pause after a pooled sandbox failed to start.
const poolRetry = 2 * time.Second

// warmPool keeps started, greeted sandboxes for new thread-scope threads,
// per image and runtime. Its filler goroutine is started by New and
// stopped and waited for by Stop (closePool). It works on its fleet's
// boxes; the fields under the line are guarded by Fleet.mu.
type warmPool struct {
	f    *Fleet
	wake chan struct{} // one pending wake-up for the filler
	wg   sync.WaitGroup

	ready  map[string][]*Box    // by poolKey, oldest first
	own    map[string]bool      // box ids of ready, filling and evicted sandboxes not yet removed
	demand map[string]time.Time // poolKey → when a thread last wanted one
	fill   *poolFill            // the sandbox being started (pool_limit.go)
}

func poolKey(image, runtime string) string { return image + "\x00" + runtime }

// startPool starts the filler when Config.Pool is set; the default image
// is wanted from the start.
func (p *warmPool) startPool(f *Fleet) {
	p.f = f
	p.wake = make(chan struct{}, 1)
	p.ready, p.own, p.demand = map[string][]*Box{}, map[string]bool{}, map[string]time.Time{}
	if p.f.cfg.Pool <= 0 {
		return
	}
	p.demand[poolKey(p.f.cfg.Image, p.f.cfg.Runtime)] = time.Now()
	p.wg.Add(1)
	go p.runPool()
}

// wakePool asks the filler to look at the pool again. It does not block.
func (p *warmPool) wakePool() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// runPool fills and trims the pool until the server closes.
func (p *warmPool) runPool() {
	defer p.wg.Done()
	tick := time.NewTicker(p.f.cfg.ReapInterval)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		p.trimPool(time.Now())
		for p.f.ctx.Err() == nil {
			key, ok := p.poolWant()
			if !ok {
				break
			}
			if err := p.fillPool(key); err != nil {
				if p.f.ctx.Err() == nil && !errors.Is(err, errPoolEvicted) && !errors.Is(err, errPoolNoRoom) {
					p.f.log.Warn("warm pool: start a sandbox", "err", err)
				}
				retry = time.After(poolRetry)
				break
			}
		}
		select {
		case <-p.f.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		case <-retry:
			retry = nil
		}
	}
}

// poolWant names a pool that is short of Config.Pool ready sandboxes and
// may grow under MaxSandboxes (counting live and pooled sandboxes).
func (p *warmPool) poolWant() (string, bool) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if max := p.f.cfg.MaxSandboxes; max > 0 && len(p.f.boxes)+len(p.own) >= max {
		return "", false
	}
	for key := range p.demand {
		if len(p.ready[key]) < p.f.cfg.Pool {
			return key, true
		}
	}
	return "", false
}

// trimPool removes the ready sandboxes of pools nobody wanted for
// PoolIdle (and stops refilling them until a thread asks again), and
// those past half their maximum lifetime, so a thread gets most of it.
func (p *warmPool) trimPool(now time.Time) {
	var drop []*Box
	p.f.mu.Lock()
	for key, last := range p.demand {
		idle := now.Sub(last) >= p.f.cfg.PoolIdle
		if idle {
			delete(p.demand, key)
		}
		kept := p.ready[key][:0]
		for _, b := range p.ready[key] {
			if idle || !now.Before(b.created.Add(p.f.cfg.MaxLifetime/2)) || p.f.roll.Stale(b.image, b.imageID) {
				drop = append(drop, b)
				continue
			}
			kept = append(kept, b)
		}
		p.ready[key] = kept
	}
	drop = append(drop, p.poolOverLimitLocked()...) // pool_limit.go
	p.f.mu.Unlock()
	p.removePooled(drop, "warm pool idle, sandbox too old or on an older build of its image")
}

// drainStale removes the ready pooled sandboxes whose image was rebuilt
// since they started (rollout.go: the ids checkImages looked up) and
// wakes the filler to start new ones. It blocks for the engine.
func (p *warmPool) drainStale() {
	var drop []*Box
	p.f.mu.Lock()
	for key, ready := range p.ready {
		kept := ready[:0]
		for _, b := range ready {
			if p.f.roll.Stale(b.image, b.imageID) {
				drop = append(drop, b)
				continue
			}
			kept = append(kept, b)
		}
		p.ready[key] = kept
	}
	p.f.mu.Unlock()
	if len(drop) > 0 {
		p.removePooled(drop, "its image was rebuilt")
		p.wakePool()
	}
}

// learnImage starts looking up what image names now, for a claim (a
// rebuild the reaper has not seen yet must not hand out the old build),
// when the manager can tell (sandbox.ImageResolver): one engine call, on
// a goroutine of its own, so that it runs beside the claim's binding. The
// returned wait blocks until what it found is learned (a failed lookup
// leaves what the last look found); the caller must call it.
func (p *warmPool) learnImage(ctx context.Context, image string) (wait func()) {
	res, ok := p.f.cfg.Manager.(sandbox.ImageResolver)
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
		p.f.mu.Lock()
		p.f.roll.Learn(map[string]string{image: id})
		p.f.mu.Unlock()
	}()
	return func() { <-done }
}

// staleBuild reports whether b, a pooled sandbox, runs an older build of
// its image than the one learned.
func (p *warmPool) staleBuild(b *Box) bool {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	return p.f.roll.Stale(b.image, b.imageID)
}

// removePooled removes sandboxes taken out of the pool's ready lists.
func (p *warmPool) removePooled(boxes []*Box, why string) {
	for _, b := range boxes {
		p.f.log.Info("warm pool: removing sandbox", "box", b.id, "why", why)
		p.f.removeResources(context.Background(), b.res, p.f.log.With("box", b.id))
		p.f.mu.Lock()
		delete(p.own, b.id)
		p.f.mu.Unlock()
	}
}

// fillPool starts one sandbox for the pool key, waits for its agent's
// hello (posture checked), closes that connection and adds the sandbox to
// the ready list. The sandbox has no LLM token, no proxies and no thread.
// poolRoomLocked may cancel the start (pool_limit.go); the sandbox is then
// removed before p.fill's done is closed.
func (p *warmPool) fillPool(key string) (err error) {
	image, runtime, _ := strings.Cut(key, "\x00")
	id, err := newBoxID("p_")
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	b := &Box{id: id, scope: wire.ScopeThread, image: image, runtime: runtime, created: now,
		expires: now.Add(p.f.cfg.MaxLifetime), idleTTL: p.f.cfg.IdleTTL, pooled: true,
		ready: make(chan struct{}), members: map[string]Member{}, res: &resources{runtime: runtime}, px: p.f.px}
	close(b.ready)
	ctx, fill, err := p.beginFill(id) // pool_limit.go
	if err != nil {
		return err
	}
	defer p.endFill(fill) // after the removal below
	log := p.f.log.With("box", id)
	defer func() {
		if err != nil {
			p.f.removeResources(p.f.ctx, b.res, log)
			p.f.mu.Lock()
			delete(p.own, id)
			if fill.evicted {
				err = errPoolEvicted
			}
			p.f.mu.Unlock()
		}
	}()
	start := time.Now()
	if err := p.poolEngineRoom(ctx); err != nil { // pool_limit.go
		return err
	}
	if b.res.dirs, err = p.f.cfg.Layout.Make(id); err != nil {
		return err
	}
	if err := p.f.px.PlaceCA(b.res.dirs); err != nil { // the agent reads it at start
		return err
	}
	spec := p.f.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := p.f.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.sandboxID = sb.ID
	// lifecycle.go: a rebuild of its image drains it (drainStale)
	p.f.rep.recordImage(ctx, b)
	conn, _, err := b.res.greet(ctx, p.f.greeter, id, false) // no token until a thread takes it
	if err != nil {
		return err
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "pooled"), time.Now().Add(greet.WriteWait))
	conn.Close()
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if p.f.closed {
		return ErrClosing
	}
	if fill.evicted {
		return errPoolEvicted
	}
	p.ready[key] = append(p.ready[key], b)
	p.fill = nil // ready: evicted from the ready list from now on
	log.Info("warm pool: sandbox ready", "sandbox", sb.ID, "image", image, "ready", len(p.ready[key]), "took", time.Since(start))
	return nil
}

// poolLabels adds the pool's labels to l: boxwire.pool, and the thread
// once claimed (a replacement container of a claimed sandbox names it).
func poolLabels(b *Box, l map[string]string) {
	l[labelPool] = "1"
	if b.thread != "" {
		l[sandbox.LabelThread] = b.thread
	}
}

// claimPooled gives the new thread threadID a ready pooled sandbox that
// matches o, bound to it (see bindPooled), or returns nil when there is
// none (the caller creates one; the pool is asked to fill for o either
// way). A pooled sandbox that fails to bind is removed and the next one
// tried. It blocks for the claim's round trips, bounded by greet.HelloTimeout.
func (p *warmPool) claimPooled(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn) {
	log := p.f.log.With("thread", threadID)
	if p.f.cfg.Pool <= 0 || o.scope != wire.ScopeThread {
		return nil, nil
	}
	learned := p.learnImage(ctx, o.image) // beside the first binding
	defer learned()
	for ctx.Err() == nil {
		start := time.Now()
		b := p.takePooled(poolKey(o.image, o.runtime), threadID, o.idleTTL)
		if b == nil {
			p.wakePool()
			return nil, nil
		}
		p.f.rules.set(b, o.egress) // egress.go: the thread's rules, before its proxy serves
		conn, err := p.bindPooled(ctx, b, threadID)
		if learned(); err == nil && p.staleBuild(b) { // the image was rebuilt: not this one
			conn.Close()
			err = errPoolStale
		}
		b.err = err
		close(b.ready)
		// The filler starts the next sandbox only once the thread has
		// started: a container's start takes both cores of a small host
		// for a while, and the claim (dial, hello, token) and the
		// client's hello waited behind it.
		time.AfterFunc(refillDelay, p.wakePool) // wakePool never blocks
		if err == nil {
			log.Info("thread took a pooled sandbox", "box", b.id, "sandbox", b.res.sandbox(), "claim", time.Since(start))
			return b, conn
		}
		log.Warn("pooled sandbox could not be claimed; removing it", "box", b.id, "err", err)
		p.f.forgetBox(b)
		p.f.removeResources(ctx, b.res, log)
	}
	return nil, nil
}

// refillDelay is how long after a claim the filler is woken to replace
// the sandbox taken: more than the rest of the thread's start (a few ms).
const refillDelay = 50 * time.Millisecond

// takePooled moves the oldest ready sandbox of key into the server's boxes
// for threadID, not ready until bound. It records the demand for key even
// when the pool is empty; the caller wakes the filler.
func (p *warmPool) takePooled(key, threadID string, idleTTL time.Duration) *Box {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.demand[key] = time.Now()
	ready := p.ready[key]
	// A sandbox on an older build of its image stays for the filler to
	// remove (trimPool), and the thread gets a new one.
	i := slices.IndexFunc(ready, func(b *Box) bool { return !p.f.roll.Stale(b.image, b.imageID) })
	if p.f.closed || i < 0 {
		return nil
	}
	if max := p.f.cfg.MaxSandboxes; max > 0 && len(p.f.boxes) >= max {
		return nil // acquireBox answers ErrLimit
	}
	b := ready[i]
	p.ready[key] = slices.Delete(ready, i, i+1)
	delete(p.own, b.id)
	b.key = boxKey(wire.ScopeThread, threadID)
	b.thread, b.idleTTL, b.lastUsed = threadID, idleTTL, time.Now()
	b.joining = 1                 // until the thread's Started
	b.ready = make(chan struct{}) // closed by claimPooled once bound
	p.f.boxes[b.key] = b
	return b
}

// bindPooled binds a taken pooled sandbox to threadID: it serves the LLM
// and egress proxies in the sandbox's own socket folder, greets the agent
// with the thread's id and sends the claim with the LLM token. It returns
// the greeted connection.
func (p *warmPool) bindPooled(ctx context.Context, b *Box, threadID string) (conn *websocket.Conn, err error) {
	log := p.f.log.With("thread", threadID)
	if b.res.proxy, err = p.f.px.ServeLLM(b.res.dirs, log); err != nil {
		return nil, err
	}
	if b.res.egress, err = p.f.px.ServeEgress(b.res.dirs, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, greet.HelloTimeout)
	defer cancel()
	return b.res.dial(ctx, p.f.greeter, threadID)
}

// poolOwns reports whether the box id is a pooled sandbox of this run,
// ready or being started (Reconcile leaves those alone).
func (p *warmPool) poolOwns(id string) bool {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	return p.own[id]
}

// closePool waits for the filler (Close cancelled p.f.ctx) and removes the
// ready pooled sandboxes: they hold nothing of any thread.
func (p *warmPool) closePool(ctx context.Context) error {
	p.wg.Wait()
	p.f.mu.Lock()
	var boxes []*Box
	for key, ready := range p.ready {
		boxes = append(boxes, ready...)
		delete(p.ready, key)
	}
	p.f.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		if err := b.res.remove(ctx, p.f.cfg.Manager); err != nil {
			errs = append(errs, fmt.Errorf("remove pooled sandbox %s: %w", b.id, err))
		}
		p.f.mu.Lock()
		delete(p.own, b.id)
		p.f.mu.Unlock()
	}
	return errors.Join(errs...)
}
