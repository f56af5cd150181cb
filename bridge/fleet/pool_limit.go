package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// errPoolEvicted ends a pooled sandbox's start that poolRoomLocked
// cancelled; its sandbox is removed.
var errPoolEvicted = errors.New("pooled sandbox evicted for room under the sandbox limit")

// errPoolNoRoom ends a pooled sandbox's start before it began: the engine
// still runs MaxSandboxes of this bridge's sandboxes.
var errPoolNoRoom = errors.New("no room under the sandbox limit")

// Pooled sandboxes count toward Config.MaxSandboxes like live ones
// (docs/pool.md): the books are len(p.f.boxes) (live and being created) plus
// len(p.own) (ready and being started). The filler never fills past
// the limit (poolWant), a new thread takes a pooled sandbox before a new
// one is made (claimPooled), and a sandbox created outside the pool when
// the books are full evicts one pooled sandbox first (poolRoomLocked).

// poolFill is the sandbox the filler is starting; at most one at a time.
// evicted is guarded by Fleet.mu.
type poolFill struct {
	id      string
	cancel  context.CancelFunc // stops the start
	done    chan struct{}      // closed once the start ended and, if it failed, its sandbox is gone
	evicted bool               // poolRoomLocked took its place: do not add it to the pool
}

// beginFill records that the filler starts the pooled sandbox id: it
// counts toward MaxSandboxes from now on, and poolRoomLocked may cancel
// the returned context. The caller defers endFill.
func (p *warmPool) beginFill(id string) (context.Context, *poolFill, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if p.f.closed {
		return nil, nil, ErrClosing
	}
	ctx, cancel := context.WithCancel(p.f.ctx)
	fill := &poolFill{id: id, cancel: cancel, done: make(chan struct{})}
	p.own[id] = true
	p.fill = fill
	return ctx, fill, nil
}

// endFill ends the start beginFill recorded and releases those waiting
// for it; a failed start's sandbox must be removed already.
func (p *warmPool) endFill(fill *poolFill) {
	p.f.mu.Lock()
	if p.fill == fill {
		p.fill = nil
	}
	p.f.mu.Unlock()
	fill.cancel()
	close(fill.done)
}

// noRoomNeeded is poolRoomLocked's answer when nothing has to go.
func noRoomNeeded(context.Context) error { return nil }

// poolRoomLocked makes room under MaxSandboxes for a sandbox about to be
// created outside the pool, which the caller adds to p.f.boxes under the
// same lock: when live and pooled sandboxes fill the limit, it takes the
// oldest ready pooled sandbox out of the pool, or else cancels the one the
// filler is starting. The caller runs the returned func after releasing
// p.f.mu and before creating its sandbox; it blocks until the evicted
// sandbox is removed (or ctx ends), so the engine does not run more than
// MaxSandboxes. The caller holds p.f.mu.
func (p *warmPool) poolRoomLocked() func(context.Context) error {
	max := p.f.cfg.MaxSandboxes
	if max <= 0 || len(p.f.boxes)+len(p.own) < max {
		return noRoomNeeded
	}
	if v := p.takeOldestReadyLocked(); v != nil {
		return func(context.Context) error {
			p.removePooled([]*Box{v}, "room for a new sandbox under --max-sandboxes")
			return nil
		}
	}
	if fill := p.fill; fill != nil && !fill.evicted {
		fill.evicted = true
		fill.cancel()
		p.f.log.Info("warm pool: cancelling a sandbox being started", "box", fill.id, "why", "room for a new sandbox under --max-sandboxes")
		return func(ctx context.Context) error {
			select {
			case <-fill.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	// What is left of the pool is being removed already.
	return noRoomNeeded
}

// takeOldestReadyLocked takes the oldest ready pooled sandbox of any image
// out of its ready list (it stays in p.own until removed), or returns
// nil. The caller holds p.f.mu.
func (p *warmPool) takeOldestReadyLocked() *Box {
	var key string
	var oldest *Box
	for k, ready := range p.ready {
		if len(ready) > 0 && (oldest == nil || ready[0].created.Before(oldest.created)) {
			key, oldest = k, ready[0]
		}
	}
	if oldest != nil {
		p.ready[key] = slices.Delete(p.ready[key], 0, 1)
	}
	return oldest
}

// poolOverLimitLocked takes ready pooled sandboxes out of the pool while
// live and pooled sandboxes are more than MaxSandboxes (as after adopting
// an earlier run's sandboxes) and returns them for removal. The caller
// holds p.f.mu.
func (p *warmPool) poolOverLimitLocked() []*Box {
	max := p.f.cfg.MaxSandboxes
	if max <= 0 {
		return nil
	}
	var drop []*Box
	for over := len(p.f.boxes) + len(p.own) - max; over > 0; over-- {
		v := p.takeOldestReadyLocked()
		if v == nil {
			break
		}
		drop = append(drop, v)
	}
	return drop
}

// poolEngineRoom asks the engine, not only the books, before the filler
// starts a sandbox: a thread's sandbox leaves p.f.boxes before its removal
// ends, and the pool must not take that room early. It blocks for one
// List call.
func (p *warmPool) poolEngineRoom(ctx context.Context) error {
	max := p.f.cfg.MaxSandboxes
	if max <= 0 {
		return nil
	}
	list, err := p.f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelOwner: p.f.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	if len(list) >= max {
		return errPoolNoRoom
	}
	return nil
}
