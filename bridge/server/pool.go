package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// DefaultPoolIdle is how long a pool waits for a thread before it shrinks.
const DefaultPoolIdle = 10 * time.Minute

// warmPool keeps started, greeted sandboxes for new thread-scope threads,
// per image and runtime. Its filler goroutine is started by New and
// stopped and waited for by Close (closePool). Fields under the line are
// guarded by Server.mu.
type warmPool struct {
	wake chan struct{} // one pending wake-up for the filler
	wg   sync.WaitGroup

	ready  map[string][]*box    // by poolKey, oldest first
	own    map[string]bool      // box ids of ready, filling and evicted sandboxes not yet removed
	demand map[string]time.Time // poolKey → when a thread last wanted one
	fill   *poolFill            // the sandbox being started (pool_limit.go)
}

func poolKey(image, runtime string) string { return image + "\x00" + runtime }

// startPool starts the filler when Config.Pool is set; the default image
// is wanted from the start.
func (s *Server) startPool() {
	p := &s.pool
	p.wake = make(chan struct{}, 1)
	p.ready, p.own, p.demand = map[string][]*box{}, map[string]bool{}, map[string]time.Time{}
	if s.cfg.Pool <= 0 {
		return
	}
	p.demand[poolKey(s.cfg.Image, s.cfg.Runtime)] = time.Now()
	p.wg.Add(1)
	go s.runPool()
}

// wakePool asks the filler to look at the pool again. It does not block.
func (s *Server) wakePool() {
	select {
	case s.pool.wake <- struct{}{}:
	default:
	}
}

// runPool fills and trims the pool until the server closes.
func (s *Server) runPool() {
	defer s.pool.wg.Done()
	tick := time.NewTicker(s.cfg.ReapInterval)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		s.trimPool(time.Now())
		for s.ctx.Err() == nil {
			key, ok := s.poolWant()
			if !ok {
				break
			}
			if err := s.fillPool(key); err != nil {
				if s.ctx.Err() == nil && !errors.Is(err, errPoolEvicted) && !errors.Is(err, errPoolNoRoom) {
					s.log.Warn("warm pool: start a sandbox", "err", err)
				}
				retry = time.After(poolRetry)
				break
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.pool.wake:
		case <-tick.C:
		case <-retry:
			retry = nil
		}
	}
}

// poolWant names a pool that is short of Config.Pool ready sandboxes and
// may grow under MaxSandboxes (counting live and pooled sandboxes).
func (s *Server) poolWant() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := s.cfg.MaxSandboxes; max > 0 && len(s.boxes)+len(s.pool.own) >= max {
		return "", false
	}
	for key := range s.pool.demand {
		if len(s.pool.ready[key]) < s.cfg.Pool {
			return key, true
		}
	}
	return "", false
}

// trimPool removes the ready sandboxes of pools nobody wanted for
// PoolIdle (and stops refilling them until a thread asks again), and
// those past half their maximum lifetime, so a thread gets most of it.
func (s *Server) trimPool(now time.Time) {
	var drop []*box
	s.mu.Lock()
	for key, last := range s.pool.demand {
		idle := now.Sub(last) >= s.cfg.PoolIdle
		if idle {
			delete(s.pool.demand, key)
		}
		kept := s.pool.ready[key][:0]
		for _, b := range s.pool.ready[key] {
			if idle || !now.Before(b.created.Add(s.cfg.MaxLifetime/2)) {
				drop = append(drop, b)
				continue
			}
			kept = append(kept, b)
		}
		s.pool.ready[key] = kept
	}
	drop = append(drop, s.poolOverLimitLocked()...) // pool_limit.go
	s.mu.Unlock()
	s.removePooled(drop, "warm pool idle or sandbox too old")
}

// removePooled removes sandboxes taken out of the pool's ready lists.
func (s *Server) removePooled(boxes []*box, why string) {
	for _, b := range boxes {
		s.log.Info("warm pool: removing sandbox", "box", b.id, "why", why)
		s.removeResources(context.Background(), b.res, s.log.With("box", b.id))
		s.mu.Lock()
		delete(s.pool.own, b.id)
		s.mu.Unlock()
	}
}

// fillPool starts one sandbox for the pool key, waits for its agent's
// hello (posture checked), closes that connection and adds the sandbox to
// the ready list. The sandbox has no LLM token, no proxies and no thread.
// poolRoomLocked may cancel the start (pool_limit.go); the sandbox is then
// removed before s.pool.fill's done is closed.
func (s *Server) fillPool(key string) (err error) {
	image, runtime, _ := strings.Cut(key, "\x00")
	id, err := newBoxID("p_")
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	b := &box{id: id, scope: wire.ScopeThread, image: image, runtime: runtime, created: now,
		expires: now.Add(s.cfg.MaxLifetime), idleTTL: s.cfg.IdleTTL, pooled: true,
		ready: make(chan struct{}), threads: map[string]*thread{}, res: &resources{runtime: runtime}}
	close(b.ready)
	ctx, fill, err := s.beginFill(id) // pool_limit.go
	if err != nil {
		return err
	}
	defer s.endFill(fill) // after the removal below
	log := s.log.With("box", id)
	defer func() {
		if err != nil {
			s.removeResources(s.ctx, b.res, log)
			s.mu.Lock()
			delete(s.pool.own, id)
			if fill.evicted {
				err = errPoolEvicted
			}
			s.mu.Unlock()
		}
	}()
	start := time.Now()
	if err := s.poolEngineRoom(ctx); err != nil { // pool_limit.go
		return err
	}
	if b.res.dirs, err = s.dirs.Make(id); err != nil {
		return err
	}
	if err := s.poolCA(b.res.dirs); err != nil {
		return err
	}
	spec := s.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := s.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.sandboxID = sb.ID
	conn, err := s.waitAgentClaim(ctx, id, b.res, false) // no token until a thread takes it
	if err != nil {
		return err
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeNormal, "pooled"), time.Now().Add(writeWait))
	conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosing
	}
	if fill.evicted {
		return errPoolEvicted
	}
	s.pool.ready[key] = append(s.pool.ready[key], b)
	s.pool.fill = nil // ready: evicted from the ready list from now on
	log.Info("warm pool: sandbox ready", "sandbox", sb.ID, "image", image, "ready", len(s.pool.ready[key]), "took", time.Since(start))
	return nil
}

// poolCA puts the egress CA certificate in a pooled sandbox's folder when
// the agent is told to trust it (it reads the file at start). The
// certificate is public; the egress proxy itself is served at claim.
func (s *Server) poolCA(dirs boxdir.Dirs) error {
	if len(s.approvalEnv()) == 0 {
		return nil
	}
	_, err := s.placeCA(dirs) // approvals_egress.go
	return err
}

// poolLabels adds the pool's labels to l: boxwire.pool, and the thread
// once claimed (a replacement container of a claimed sandbox names it).
func poolLabels(b *box, l map[string]string) {
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
func (s *Server) claimPooled(ctx context.Context, o boxOptions, threadID string, log *slog.Logger) (*box, *websocket.Conn) {
	if s.cfg.Pool <= 0 || o.scope != wire.ScopeThread {
		return nil, nil
	}
	for ctx.Err() == nil {
		start := time.Now()
		b := s.takePooled(poolKey(o.image, o.runtime), threadID, o.idleTTL)
		if b == nil {
			return nil, nil
		}
		s.setBoxEgress(b, o.egress) // egress_thread.go: the thread's rules, before its proxy serves
		conn, err := s.bindPooled(ctx, b, threadID, log)
		b.err = err
		close(b.ready)
		if err == nil {
			log.Info("thread took a pooled sandbox", "box", b.id, "sandbox", b.res.sandbox(), "claim", time.Since(start))
			return b, conn
		}
		log.Warn("pooled sandbox could not be claimed; removing it", "box", b.id, "err", err)
		s.dropBox(ctx, b, log)
	}
	return nil, nil
}

// takePooled moves the oldest ready sandbox of key into the server's boxes
// for threadID, not ready until bound, and wakes the filler. It records the
// demand for key even when the pool is empty.
func (s *Server) takePooled(key, threadID string, idleTTL time.Duration) *box {
	defer s.wakePool()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pool.demand[key] = time.Now()
	ready := s.pool.ready[key]
	if s.closed || len(ready) == 0 {
		return nil
	}
	if max := s.cfg.MaxSandboxes; max > 0 && len(s.boxes) >= max {
		return nil // acquireBox answers errLimit
	}
	b := ready[0]
	s.pool.ready[key] = ready[1:]
	delete(s.pool.own, b.id)
	b.key = boxKey(wire.ScopeThread, threadID)
	b.thread, b.idleTTL, b.lastUsed = threadID, idleTTL, time.Now()
	b.joining = 1                 // until createThread's joined
	b.ready = make(chan struct{}) // closed by claimPooled once bound
	s.boxes[b.key] = b
	return b
}

// bindPooled binds a taken pooled sandbox to threadID: it serves the LLM
// and egress proxies in the sandbox's own socket folder, greets the agent
// with the thread's id and sends the claim with the LLM token. It returns
// the greeted connection.
func (s *Server) bindPooled(ctx context.Context, b *box, threadID string, log *slog.Logger) (conn *websocket.Conn, err error) {
	if b.res.proxy, err = s.serveProxy(b.res.dirs, log); err != nil {
		return nil, err
	}
	if b.res.egress, err = s.serveEgress(b.res.dirs, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	return s.greetAgent(ctx, b.res.dirs, threadID, s.cfg.Posture.ForRuntime(b.runtime), true)
}

// poolOwns reports whether the box id is a pooled sandbox of this run,
// ready or being started (Reconcile leaves those alone).
func (s *Server) poolOwns(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pool.own[id]
}

// closePool waits for the filler (Close cancelled s.ctx) and removes the
// ready pooled sandboxes: they hold nothing of any thread.
func (s *Server) closePool(ctx context.Context) error {
	s.pool.wg.Wait()
	s.mu.Lock()
	var boxes []*box
	for key, ready := range s.pool.ready {
		boxes = append(boxes, ready...)
		delete(s.pool.ready, key)
	}
	s.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		if err := b.res.remove(ctx, s.cfg.Manager); err != nil {
			errs = append(errs, fmt.Errorf("remove pooled sandbox %s: %w", b.id, err))
		}
		s.mu.Lock()
		delete(s.pool.own, b.id)
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
