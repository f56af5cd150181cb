package wire

import (
	"slices"
	"sync/atomic"
	"time"
)

// Target is one receiver of a Fanout: a connection's queue, or something
// in front of one.
type Target interface {
	// Offer queues frame without blocking and reports whether it did.
	Offer(frame []byte) bool
	// Watch asks for w.Wake whenever the target may have room again,
	// until Unwatch(w). A Queue (through its Watchers) does this.
	Watch(w *Waker)
	// Unwatch ends a Watch.
	Unwatch(w *Waker)
}

// Fanout offers frames to sets of Targets with the waiting rule of the
// package comment. Its zero value is ready once StallLimit and LagGrace
// are set; it must not be copied after first use. It is safe for
// concurrent use, and meant for one caller at a time (a terminal
// session's output, which is in order anyway): that caller's waits reuse
// one Waker and timer, a concurrent caller's wait makes its own.
type Fanout[T Target] struct {
	// StallLimit bounds waiting while every target is full.
	StallLimit time.Duration
	// LagGrace bounds how long a full target may lag behind one that took
	// the frame.
	LagGrace time.Duration

	busy  atomic.Bool // a wait is using w and timer
	w     *Waker
	timer *time.Timer
}

// Deliver offers frame to every target in targets, waiting for those that
// are full (see the package comment), and returns the ones that never took
// it: too slow, for the caller to detach. It returns nil at once when done
// is closed. It reorders and reuses targets' array (the result shares it).
func (f *Fanout[T]) Deliver(done <-chan struct{}, targets []T, frame []byte) (slow []T) {
	total := len(targets)
	pending := slices.DeleteFunc(targets, func(t T) bool { return t.Offer(frame) })
	if len(pending) == 0 {
		return nil
	}
	lagging := len(pending) < total
	if !f.busy.CompareAndSwap(false, true) {
		own := &Fanout[T]{StallLimit: f.StallLimit, LagGrace: f.LagGrace}
		return own.wait(done, pending, lagging, frame)
	}
	defer f.busy.Store(false)
	return f.wait(done, pending, lagging, frame)
}

// wait is Deliver's slow path: pending refused frame; lagging says another
// target took it already.
func (f *Fanout[T]) wait(done <-chan struct{}, pending []T, lagging bool, frame []byte) []T {
	if f.w == nil {
		f.w = NewWaker()
	}
	f.w.clear()
	now := time.Now()
	deadline := now.Add(f.StallLimit)
	if lagging {
		deadline = now.Add(f.LagGrace)
	}
	f.arm(deadline.Sub(now))
	defer f.timer.Stop()
	for _, t := range pending {
		t.Watch(f.w) // before the next offer: a release after it wakes us
	}
	taken := func(t T) bool {
		if t.Offer(frame) {
			t.Unwatch(f.w)
			return true
		}
		return false
	}
	for {
		before := len(pending)
		pending = slices.DeleteFunc(pending, taken)
		if len(pending) == 0 {
			return nil
		}
		now := time.Now()
		if len(pending) < before && now.Add(f.LagGrace).Before(deadline) {
			deadline = now.Add(f.LagGrace)
			f.arm(deadline.Sub(now))
		}
		if !now.Before(deadline) {
			break
		}
		select {
		case <-done:
			f.unwatch(pending)
			return nil
		case <-f.w.C():
		case <-f.timer.C:
		}
	}
	f.unwatch(pending)
	return pending
}

// arm sets the timer to fire after d.
func (f *Fanout[T]) arm(d time.Duration) {
	if f.timer == nil {
		f.timer = time.NewTimer(d)
		return
	}
	f.timer.Reset(d) // since Go 1.23 no stale value survives a Reset
}

func (f *Fanout[T]) unwatch(ts []T) {
	for _, t := range ts {
		t.Unwatch(f.w)
	}
}
