package fleet

import "github.com/boxwire/boxwire/bridge/internal/keyed"

// Locks are a fleet's lifecycle locks, one per thread and one per box
// (Fleet.Locks). A thread's keeps two callers from resuming one suspended
// thread twice, or changing a thread while it is resumed or removed. A
// box's keeps a sandbox from being started under a box id whose old
// sandbox is still being removed (suspension, retention), and a thread
// from joining a sandbox while its egress rules or image change or it is
// suspended. Lock order: a thread's lock before a box's. They are held
// across engine calls, never with the fleet's own mutex. The zero Locks
// is ready; it is safe for concurrent use.
type Locks struct{ m keyed.Mutex }

// Thread locks thread id and returns the unlock.
func (l *Locks) Thread(id string) (unlock func()) { return l.m.Lock("thread:" + id) }

// TryThread locks thread id unless it is locked now, and reports whether
// it did: a caller holding another thread's lock may try it without
// breaking the lock order.
func (l *Locks) TryThread(id string) (unlock func(), ok bool) {
	return l.m.TryLock("thread:" + id)
}

// Box locks box id and returns the unlock.
func (l *Locks) Box(id string) (unlock func()) { return l.m.Lock("box:" + id) }
