// Package warm is a warm pool (docs/pool.md): sandboxes started and
// greeted ahead of time, per Key (an image and a runtime), for new threads
// to take. It keeps the pool's books — the ready sandboxes of each key,
// oldest first; the ids it owns (ready, being started, given up and not
// yet removed); when a thread last wanted each key; the one sandbox being
// started — and runs the filler, a goroutine that keeps Config.Size ready
// of every key a thread wanted within Config.Idle, within Config.Max
// together with the host's own sandboxes.
//
// It knows nothing of how a sandbox is made, greeted or removed, nor of
// threads: its Host does those (bridge/fleet is the host). The books are
// guarded by the host's lock (Config.Lock), so that the host can count
// its own sandboxes and the pool's in one step: methods whose names end
// in Locked are called with that lock held; the others take it.
//
// Goroutines: New starts the filler when Config.Size is above zero; it
// runs until New's context ends, and Close waits for it.
package warm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// retryPause is the pause after a pooled sandbox failed to start.
const retryPause = 2 * time.Second

// ErrEvicted ends a start that MakeRoomLocked gave up (room for a sandbox
// of the host's); the pool removes the sandbox.
var ErrEvicted = errors.New("pooled sandbox evicted for room under the sandbox limit")

// ErrNoRoom is what Host.Start answers when the engine still runs the
// limit of sandboxes: the filler tries again later.
var ErrNoRoom = errors.New("no room under the sandbox limit")

// ErrClosing ends a start that finished after the host closed.
var ErrClosing = errors.New("warm pool closing")

// Key names a pool: the sandboxes of one image and runtime.
type Key struct{ Image, Runtime string }

// Host is what a pool needs of its fleet.
type Host[T any] interface {
	// New makes the record of a pooled sandbox for key, not started yet;
	// it does no I/O.
	New(key Key) (T, error)
	// Start starts sb and greets its agent (no thread's, no token); ctx
	// ends when the pool gives the start up. ErrNoRoom: the engine is
	// full.
	Start(ctx context.Context, sb T) error
	// Remove removes sb, started or not, with all it holds.
	Remove(ctx context.Context, sb T) error
	// ID is sb's box id; Created when it was made.
	ID(sb T) string
	Created(sb T) time.Time
	// StaleLocked reports whether sb runs an older build of its image.
	StaleLocked(sb T) bool
	// LiveLocked is how many sandboxes the host runs or makes, the
	// pool's not counted.
	LiveLocked() int
	// ClosedLocked reports whether the host takes no more sandboxes.
	ClosedLocked() bool
}

// Config configures a Pool.
type Config struct {
	// Lock guards the books; the host holds it around ...Locked calls.
	Lock sync.Locker
	// Size is how many ready sandboxes each wanted key keeps (0: the pool
	// starts nothing).
	Size int
	// Idle empties a key's pool nobody took from for that long.
	Idle time.Duration
	// MaxAge replaces a ready sandbox that old, so a thread gets most of
	// its lifetime.
	MaxAge time.Duration
	// Max bounds the host's and the pool's sandboxes together (0: none).
	Max int
	// Tick is how often the filler looks at the pool unasked.
	Tick time.Duration
	// Default is the key wanted from the start.
	Default Key
	Logger  *slog.Logger
}

// Pool is a warm pool; see the package documentation.
type Pool[T any] struct {
	cfg  Config
	host Host[T]
	log  *slog.Logger
	ctx  context.Context
	wake chan struct{} // one pending wake-up for the filler
	wg   sync.WaitGroup

	// Guarded by cfg.Lock.
	ready  map[Key][]T       // oldest first
	own    map[string]bool   // ids of ready, starting and given-up sandboxes not yet removed
	demand map[Key]time.Time // when a thread last wanted one
	fill   *fill             // the sandbox being started
}

// fill is the sandbox the filler is starting; at most one at a time.
// evicted is guarded by the lock.
type fill struct {
	id      string
	cancel  context.CancelFunc // stops the start
	done    chan struct{}      // closed once the start ended and, if it failed, its sandbox is gone
	evicted bool               // MakeRoomLocked took its place: not to be added
}

// New returns a pool for host and starts its filler when cfg.Size is
// above zero; the filler stops when ctx ends (Close waits for it).
func New[T any](ctx context.Context, cfg Config, host Host[T]) *Pool[T] {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool[T]{cfg: cfg, host: host, log: log, ctx: ctx, wake: make(chan struct{}, 1),
		ready: map[Key][]T{}, own: map[string]bool{}, demand: map[Key]time.Time{}}
	if cfg.Size <= 0 {
		return p
	}
	p.demand[cfg.Default] = time.Now()
	p.wg.Add(1)
	go p.run()
	return p
}

// Wake asks the filler to look at the pool again. It does not block.
func (p *Pool[T]) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run fills and trims the pool until p.ctx ends.
func (p *Pool[T]) run() {
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		p.trim(time.Now())
		for p.ctx.Err() == nil {
			key, ok := p.want()
			if !ok {
				break
			}
			if err := p.startOne(key); err != nil {
				if p.ctx.Err() == nil && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrNoRoom) {
					p.log.Warn("warm pool: start a sandbox", "err", err)
				}
				retry = time.After(retryPause)
				break
			}
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		case <-retry:
			retry = nil
		}
	}
}

// want names a key that is short of Size ready sandboxes and may grow
// under Max.
func (p *Pool[T]) want() (Key, bool) {
	p.cfg.Lock.Lock()
	defer p.cfg.Lock.Unlock()
	if p.cfg.Max > 0 && p.host.LiveLocked()+len(p.own) >= p.cfg.Max {
		return Key{}, false
	}
	for key := range p.demand {
		if len(p.ready[key]) < p.cfg.Size {
			return key, true
		}
	}
	return Key{}, false
}

// trim removes the ready sandboxes of keys nobody wanted for Idle (and
// stops refilling them until a thread asks again), those older than
// MaxAge or on an older build, and those over Max.
func (p *Pool[T]) trim(now time.Time) {
	var drop []T
	p.cfg.Lock.Lock()
	for key, last := range p.demand {
		idle := now.Sub(last) >= p.cfg.Idle
		if idle {
			delete(p.demand, key)
		}
		p.ready[key] = p.keepLocked(p.ready[key], &drop, func(sb T) bool {
			return !idle && now.Before(p.host.Created(sb).Add(p.cfg.MaxAge)) && !p.host.StaleLocked(sb)
		})
	}
	drop = append(drop, p.overMaxLocked()...)
	p.cfg.Lock.Unlock()
	p.remove(drop, "warm pool idle, sandbox too old or on an older build of its image")
}

// keepLocked returns the sandboxes of ready that keep reports true for,
// adding the others to drop.
func (p *Pool[T]) keepLocked(ready []T, drop *[]T, keep func(T) bool) []T {
	kept := ready[:0]
	for _, sb := range ready {
		if keep(sb) {
			kept = append(kept, sb)
		} else {
			*drop = append(*drop, sb)
		}
	}
	return kept
}

// DrainStale removes the ready sandboxes on an older build of their image
// (the host learned of a rebuild) and wakes the filler to start new ones.
// It blocks for the engine.
func (p *Pool[T]) DrainStale() {
	var drop []T
	p.cfg.Lock.Lock()
	for key, ready := range p.ready {
		p.ready[key] = p.keepLocked(ready, &drop, func(sb T) bool { return !p.host.StaleLocked(sb) })
	}
	p.cfg.Lock.Unlock()
	if len(drop) > 0 {
		p.remove(drop, "its image was rebuilt")
		p.Wake()
	}
}

// remove removes sandboxes taken out of the ready lists.
func (p *Pool[T]) remove(sbs []T, why string) {
	for _, sb := range sbs {
		id := p.host.ID(sb)
		p.log.Info("warm pool: removing sandbox", "box", id, "why", why)
		if err := p.host.Remove(context.Background(), sb); err != nil {
			p.log.Warn("warm pool: remove sandbox", "box", id, "err", err)
		}
		p.cfg.Lock.Lock()
		delete(p.own, id)
		p.cfg.Lock.Unlock()
	}
}

// startOne starts one sandbox for key and adds it to the ready list once
// its agent was greeted. MakeRoomLocked may give the start up; the
// sandbox is then removed before the fill's done is closed.
func (p *Pool[T]) startOne(key Key) (err error) {
	sb, err := p.host.New(key)
	if err != nil {
		return err
	}
	id := p.host.ID(sb)
	ctx, f, err := p.begin(id)
	if err != nil {
		return err
	}
	defer p.end(f) // after the removal below
	defer func() {
		if err == nil {
			return
		}
		if rerr := p.host.Remove(p.ctx, sb); rerr != nil {
			p.log.Warn("warm pool: remove a sandbox that did not start", "box", id, "err", rerr)
		}
		p.cfg.Lock.Lock()
		delete(p.own, id)
		if f.evicted {
			err = ErrEvicted
		}
		p.cfg.Lock.Unlock()
	}()
	start := time.Now()
	if err := p.host.Start(ctx, sb); err != nil {
		return err
	}
	p.cfg.Lock.Lock()
	defer p.cfg.Lock.Unlock()
	switch {
	case p.host.ClosedLocked():
		return ErrClosing
	case f.evicted:
		return ErrEvicted
	}
	p.ready[key] = append(p.ready[key], sb)
	p.fill = nil // ready: evicted from the ready list from now on
	p.log.Info("warm pool: sandbox ready", "box", id, "image", key.Image, "ready", len(p.ready[key]), "took", time.Since(start))
	return nil
}

// begin records that the filler starts the sandbox id: it counts toward
// Max from now on, and MakeRoomLocked may cancel the returned context.
// The caller defers end.
func (p *Pool[T]) begin(id string) (context.Context, *fill, error) {
	p.cfg.Lock.Lock()
	defer p.cfg.Lock.Unlock()
	if p.host.ClosedLocked() {
		return nil, nil, ErrClosing
	}
	ctx, cancel := context.WithCancel(p.ctx)
	f := &fill{id: id, cancel: cancel, done: make(chan struct{})}
	p.own[id] = true
	p.fill = f
	return ctx, f, nil
}

// end ends the start begin recorded and releases those waiting for it; a
// failed start's sandbox must be removed already.
func (p *Pool[T]) end(f *fill) {
	p.cfg.Lock.Lock()
	if p.fill == f {
		p.fill = nil
	}
	p.cfg.Lock.Unlock()
	f.cancel()
	close(f.done)
}

// WantLocked records that a thread wanted key now (its pool is kept, or
// made, and refilled); TakeLocked does it too.
func (p *Pool[T]) WantLocked(key Key) { p.demand[key] = time.Now() }

// TakeLocked takes the oldest ready sandbox of key that usable accepts
// out of the pool for a thread (the pool no longer owns it), and records
// that a thread wanted key, even when it finds none; the caller wakes the
// filler then. Sandboxes usable refuses stay for the filler to remove.
func (p *Pool[T]) TakeLocked(key Key, usable func(T) bool) (T, bool) {
	p.WantLocked(key)
	ready := p.ready[key]
	i := slices.IndexFunc(ready, usable)
	if i < 0 {
		var none T
		return none, false
	}
	sb := ready[i]
	p.ready[key] = slices.Delete(ready, i, i+1)
	delete(p.own, p.host.ID(sb))
	return sb, true
}

// OwnsLocked reports whether the box id is a pooled sandbox of this run,
// ready or being started.
func (p *Pool[T]) OwnsLocked(id string) bool { return p.own[id] }

// Owns is OwnsLocked, taking the lock.
func (p *Pool[T]) Owns(id string) bool {
	p.cfg.Lock.Lock()
	defer p.cfg.Lock.Unlock()
	return p.own[id]
}

// OwnedLocked is how many sandboxes the pool owns: they count toward Max.
func (p *Pool[T]) OwnedLocked() int { return len(p.own) }

// ReadyLocked calls f with each key's ready sandboxes (oldest first; not
// to be kept) and reports whether one is being started.
func (p *Pool[T]) ReadyLocked(f func(key Key, ready []T)) (starting bool) {
	for key, ready := range p.ready {
		f(key, ready)
	}
	return p.fill != nil
}

// noRoomNeeded is MakeRoomLocked's answer when nothing has to go.
func noRoomNeeded(context.Context) error { return nil }

// MakeRoomLocked makes room under Max for a sandbox of the host's about
// to be made, which the host counts in LiveLocked under the same lock:
// when the host's and the pool's sandboxes fill Max, it takes the oldest
// ready sandbox out of the pool, or else gives up the one being started.
// The host runs the returned func after releasing the lock and before
// making its sandbox; it blocks until the sandbox given up is removed
// (or ctx ends), so the engine never runs more than Max.
func (p *Pool[T]) MakeRoomLocked() func(context.Context) error {
	if p.cfg.Max <= 0 || p.host.LiveLocked()+len(p.own) < p.cfg.Max {
		return noRoomNeeded
	}
	if sb, ok := p.takeOldestLocked(); ok {
		return func(context.Context) error {
			p.remove([]T{sb}, "room for a new sandbox under --max-sandboxes")
			return nil
		}
	}
	if f := p.fill; f != nil && !f.evicted {
		f.evicted = true
		f.cancel()
		p.log.Info("warm pool: cancelling a sandbox being started", "box", f.id, "why", "room for a new sandbox under --max-sandboxes")
		return func(ctx context.Context) error {
			select {
			case <-f.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return noRoomNeeded // what is left of the pool is being removed already
}

// takeOldestLocked takes the oldest ready sandbox of any key out of its
// ready list (it stays owned until removed).
func (p *Pool[T]) takeOldestLocked() (T, bool) {
	var (
		key    Key
		oldest T
		found  bool
	)
	for k, ready := range p.ready {
		if len(ready) > 0 && (!found || p.host.Created(ready[0]).Before(p.host.Created(oldest))) {
			key, oldest, found = k, ready[0], true
		}
	}
	if found {
		p.ready[key] = slices.Delete(p.ready[key], 0, 1)
	}
	return oldest, found
}

// overMaxLocked takes ready sandboxes out of the pool while the host's
// and the pool's are more than Max (as after the host adopted an earlier
// run's sandboxes) and returns them for removal.
func (p *Pool[T]) overMaxLocked() []T {
	if p.cfg.Max <= 0 {
		return nil
	}
	var drop []T
	for over := p.host.LiveLocked() + len(p.own) - p.cfg.Max; over > 0; over-- {
		sb, ok := p.takeOldestLocked()
		if !ok {
			break
		}
		drop = append(drop, sb)
	}
	return drop
}

// Close waits for the filler (New's context must have ended) and removes
// the ready sandboxes: they hold nothing of any thread.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.wg.Wait()
	p.cfg.Lock.Lock()
	var sbs []T
	for key, ready := range p.ready {
		sbs = append(sbs, ready...)
		delete(p.ready, key)
	}
	p.cfg.Lock.Unlock()
	var errs []error
	for _, sb := range sbs {
		id := p.host.ID(sb)
		if err := p.host.Remove(ctx, sb); err != nil {
			errs = append(errs, fmt.Errorf("remove pooled sandbox %s: %w", id, err))
		}
		p.cfg.Lock.Lock()
		delete(p.own, id)
		p.cfg.Lock.Unlock()
	}
	return errors.Join(errs...)
}
