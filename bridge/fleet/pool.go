package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// labelPool marks a sandbox started for the warm pool: its box id (p_…) is
// not its thread's id, and until a thread takes it no label, environment
// variable or socket names one (docs/pool.md).
const labelPool = "boxwire.pool"

// poolRetry is the pause after a pooled sandbox failed to start.
const poolRetry = 2 * time.Second

// warmPool keeps started, greeted sandboxes for new thread-scope threads,
// per image and runtime. Its filler goroutine is started by New and
// stopped and waited for by Close (closePool). Fields under the line are
// guarded by Fleet.mu.
type warmPool struct {
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
func (f *Fleet) startPool() {
	p := &f.pool
	p.wake = make(chan struct{}, 1)
	p.ready, p.own, p.demand = map[string][]*Box{}, map[string]bool{}, map[string]time.Time{}
	if f.cfg.Pool <= 0 {
		return
	}
	p.demand[poolKey(f.cfg.Image, f.cfg.Runtime)] = time.Now()
	p.wg.Add(1)
	go f.runPool()
}

// wakePool asks the filler to look at the pool again. It does not block.
func (f *Fleet) wakePool() {
	select {
	case f.pool.wake <- struct{}{}:
	default:
	}
}

// runPool fills and trims the pool until the server closes.
func (f *Fleet) runPool() {
	defer f.pool.wg.Done()
	tick := time.NewTicker(f.cfg.ReapInterval)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		f.trimPool(time.Now())
		for f.ctx.Err() == nil {
			key, ok := f.poolWant()
			if !ok {
				break
			}
			if err := f.fillPool(key); err != nil {
				if f.ctx.Err() == nil && !errors.Is(err, errPoolEvicted) && !errors.Is(err, errPoolNoRoom) {
					f.log.Warn("warm pool: start a sandbox", "err", err)
				}
				retry = time.After(poolRetry)
				break
			}
		}
		select {
		case <-f.ctx.Done():
			return
		case <-f.pool.wake:
		case <-tick.C:
		case <-retry:
			retry = nil
		}
	}
}

// poolWant names a pool that is short of Config.Pool ready sandboxes and
// may grow under MaxSandboxes (counting live and pooled sandboxes).
func (f *Fleet) poolWant() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if max := f.cfg.MaxSandboxes; max > 0 && len(f.boxes)+len(f.pool.own) >= max {
		return "", false
	}
	for key := range f.pool.demand {
		if len(f.pool.ready[key]) < f.cfg.Pool {
			return key, true
		}
	}
	return "", false
}

// trimPool removes the ready sandboxes of pools nobody wanted for
// PoolIdle (and stops refilling them until a thread asks again), and
// those past half their maximum lifetime, so a thread gets most of it.
func (f *Fleet) trimPool(now time.Time) {
	var drop []*Box
	f.mu.Lock()
	for key, last := range f.pool.demand {
		idle := now.Sub(last) >= f.cfg.PoolIdle
		if idle {
			delete(f.pool.demand, key)
		}
		kept := f.pool.ready[key][:0]
		for _, b := range f.pool.ready[key] {
			if idle || !now.Before(b.created.Add(f.cfg.MaxLifetime/2)) {
				drop = append(drop, b)
				continue
			}
			kept = append(kept, b)
		}
		f.pool.ready[key] = kept
	}
	drop = append(drop, f.poolOverLimitLocked()...) // pool_limit.go
	f.mu.Unlock()
	f.removePooled(drop, "warm pool idle or sandbox too old")
}

// removePooled removes sandboxes taken out of the pool's ready lists.
func (f *Fleet) removePooled(boxes []*Box, why string) {
	for _, b := range boxes {
		f.log.Info("warm pool: removing sandbox", "box", b.id, "why", why)
		f.removeResources(context.Background(), b.res, f.log.With("box", b.id))
		f.mu.Lock()
		delete(f.pool.own, b.id)
		f.mu.Unlock()
	}
}

// fillPool starts one sandbox for the pool key, waits for its agent's
// hello (posture checked), closes that connection and adds the sandbox to
// the ready list. The sandbox has no LLM token, no proxies and no thread.
// poolRoomLocked may cancel the start (pool_limit.go); the sandbox is then
// removed before f.pool.fill's done is closed.
func (f *Fleet) fillPool(key string) (err error) {
	image, runtime, _ := strings.Cut(key, "\x00")
	id, err := newBoxID("p_")
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	b := &Box{id: id, scope: wire.ScopeThread, image: image, runtime: runtime, created: now,
		expires: now.Add(f.cfg.MaxLifetime), idleTTL: f.cfg.IdleTTL, pooled: true,
		ready: make(chan struct{}), members: map[string]Member{}, res: &resources{runtime: runtime}}
	close(b.ready)
	ctx, fill, err := f.beginFill(id) // pool_limit.go
	if err != nil {
		return err
	}
	defer f.endFill(fill) // after the removal below
	log := f.log.With("box", id)
	defer func() {
		if err != nil {
			f.removeResources(f.ctx, b.res, log)
			f.mu.Lock()
			delete(f.pool.own, id)
			if fill.evicted {
				err = errPoolEvicted
			}
			f.mu.Unlock()
		}
	}()
	start := time.Now()
	if err := f.poolEngineRoom(ctx); err != nil { // pool_limit.go
		return err
	}
	if b.res.dirs, err = f.cfg.Layout.Make(id); err != nil {
		return err
	}
	if err := f.poolCA(b.res.dirs); err != nil {
		return err
	}
	spec := f.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := f.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.sandboxID = sb.ID
	conn, err := f.waitAgent(ctx, id, b.res, false) // no token until a thread takes it
	if err != nil {
		return err
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "pooled"), time.Now().Add(writeWait))
	conn.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosing
	}
	if fill.evicted {
		return errPoolEvicted
	}
	f.pool.ready[key] = append(f.pool.ready[key], b)
	f.pool.fill = nil // ready: evicted from the ready list from now on
	log.Info("warm pool: sandbox ready", "sandbox", sb.ID, "image", image, "ready", len(f.pool.ready[key]), "took", time.Since(start))
	return nil
}

// poolCA puts the egress CA certificate in a pooled sandbox's folder when
// the agent is told to trust it (it reads the file at start). The
// certificate is public; the egress proxy itself is served at claim.
func (f *Fleet) poolCA(dirs boxdir.Dirs) error {
	if len(f.approvalEnv()) == 0 {
		return nil
	}
	_, err := f.placeCA(dirs) // egress.go
	return err
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
// tried. It blocks for the claim's round trips, bounded by helloTimeout.
func (f *Fleet) claimPooled(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn) {
	log := f.log.With("thread", threadID)
	if f.cfg.Pool <= 0 || o.scope != wire.ScopeThread {
		return nil, nil
	}
	for ctx.Err() == nil {
		start := time.Now()
		b := f.takePooled(poolKey(o.image, o.runtime), threadID, o.idleTTL)
		if b == nil {
			return nil, nil
		}
		f.setBoxEgress(b, o.egress) // egress.go: the thread's rules, before its proxy serves
		conn, err := f.bindPooled(ctx, b, threadID)
		b.err = err
		close(b.ready)
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

// takePooled moves the oldest ready sandbox of key into the server's boxes
// for threadID, not ready until bound, and wakes the filler. It records the
// demand for key even when the pool is empty.
func (f *Fleet) takePooled(key, threadID string, idleTTL time.Duration) *Box {
	defer f.wakePool()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pool.demand[key] = time.Now()
	ready := f.pool.ready[key]
	if f.closed || len(ready) == 0 {
		return nil
	}
	if max := f.cfg.MaxSandboxes; max > 0 && len(f.boxes) >= max {
		return nil // acquireBox answers ErrLimit
	}
	b := ready[0]
	f.pool.ready[key] = ready[1:]
	delete(f.pool.own, b.id)
	b.key = boxKey(wire.ScopeThread, threadID)
	b.thread, b.idleTTL, b.lastUsed = threadID, idleTTL, time.Now()
	b.joining = 1                 // until the thread's Started
	b.ready = make(chan struct{}) // closed by claimPooled once bound
	f.boxes[b.key] = b
	return b
}

// bindPooled binds a taken pooled sandbox to threadID: it serves the LLM
// and egress proxies in the sandbox's own socket folder, greets the agent
// with the thread's id and sends the claim with the LLM token. It returns
// the greeted connection.
func (f *Fleet) bindPooled(ctx context.Context, b *Box, threadID string) (conn *websocket.Conn, err error) {
	log := f.log.With("thread", threadID)
	if b.res.proxy, err = f.serveProxy(b.res.dirs, log); err != nil {
		return nil, err
	}
	if b.res.egress, err = f.serveEgress(b.res.dirs, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	return f.greetAgent(ctx, b.res.dirs, threadID, f.cfg.Posture.ForRuntime(b.runtime), true)
}

// poolOwns reports whether the box id is a pooled sandbox of this run,
// ready or being started (Reconcile leaves those alone).
func (f *Fleet) poolOwns(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pool.own[id]
}

// closePool waits for the filler (Close cancelled f.ctx) and removes the
// ready pooled sandboxes: they hold nothing of any thread.
func (f *Fleet) closePool(ctx context.Context) error {
	f.pool.wg.Wait()
	f.mu.Lock()
	var boxes []*Box
	for key, ready := range f.pool.ready {
		boxes = append(boxes, ready...)
		delete(f.pool.ready, key)
	}
	f.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		if err := b.res.remove(ctx, f.cfg.Manager); err != nil {
			errs = append(errs, fmt.Errorf("remove pooled sandbox %s: %w", b.id, err))
		}
		f.mu.Lock()
		delete(f.pool.own, b.id)
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}
