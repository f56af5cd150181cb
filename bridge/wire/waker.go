package wire

import (
	"sync"
	"sync/atomic"
)

// Waker is a wake-up call that is never lost and never blocks: Wake leaves
// at most one signal in C until somebody takes it. It is safe for
// concurrent use.
type Waker struct{ c chan struct{} }

// NewWaker returns a Waker with no signal pending.
func NewWaker() *Waker { return &Waker{c: make(chan struct{}, 1)} }

// Wake leaves a signal in C unless one is already there. It does not block.
func (w *Waker) Wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// C is the channel that holds the pending signal.
func (w *Waker) C() <-chan struct{} { return w.c }

// clear drops a pending signal, if any.
func (w *Waker) clear() {
	select {
	case <-w.c:
	default:
	}
}

// Watchers is a set of Wakers to wake when something frees room; a Queue
// has one, and a Target may embed one. The zero value is an empty set.
// It is safe for concurrent use; Wake costs one atomic load while nobody
// watches.
type Watchers struct {
	mu sync.Mutex
	n  atomic.Int32 // len(ws), read without mu by Wake
	ws []*Waker
}

// Watch adds w: every Wake after Watch returns wakes w, until Unwatch.
// Adding w twice needs two Unwatch calls.
func (s *Watchers) Watch(w *Waker) {
	s.mu.Lock()
	s.ws = append(s.ws, w)
	s.n.Store(int32(len(s.ws)))
	s.mu.Unlock()
}

// Unwatch removes w (one addition of it); removing a Waker that is not
// watching does nothing.
func (s *Watchers) Unwatch(w *Waker) {
	s.mu.Lock()
	for i, x := range s.ws {
		if x == w {
			last := len(s.ws) - 1
			s.ws[i] = s.ws[last]
			s.ws[last] = nil
			s.ws = s.ws[:last]
			break
		}
	}
	s.n.Store(int32(len(s.ws)))
	s.mu.Unlock()
}

// Wake wakes every watching Waker. It does not block.
func (s *Watchers) Wake() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	for _, w := range s.ws {
		w.Wake()
	}
	s.mu.Unlock()
}
