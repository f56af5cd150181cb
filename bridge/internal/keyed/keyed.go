// Package keyed provides a mutex per key: goroutines that lock the same key
// take turns, goroutines with different keys never wait for each other.
//
// The bridge uses it where work on one name must not overlap: a workspace
// volume's loop device is attached by one sandbox create while another
// sandbox's removal may detach it (bridge/sandbox), and a thread is resumed
// or a box id reused while its old sandbox is still being removed
// (bridge/server).
package keyed

import "sync"

// Mutex is a set of mutexes, one per key. An entry lives only while a
// goroutine holds or waits for it, so keys that come and go (thread ids,
// volume names) do not accumulate. The zero value is ready to use; a Mutex
// must not be copied after first use.
type Mutex struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	mu sync.Mutex
	n  int // holders and waiters
}

// Lock locks key, blocking while another goroutine holds it, and returns
// its unlock. Calling unlock more than once is harmless: only the first
// call unlocks, so a deferred unlock may back up an early one.
func (m *Mutex) Lock(key string) (unlock func()) {
	e := m.enter(key)
	e.mu.Lock()
	return m.unlocker(key, e)
}

// TryLock locks key unless another goroutine holds it, without waiting,
// and reports whether it did; unlock is as Lock's. A caller that holds one
// key may try another in any order without risking a deadlock.
func (m *Mutex) TryLock(key string) (unlock func(), ok bool) {
	e := m.enter(key)
	if !e.mu.TryLock() {
		m.leave(key, e)
		return nil, false
	}
	return m.unlocker(key, e), true
}

// enter counts a holder or waiter in key's entry, made on first use.
func (m *Mutex) enter(key string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks == nil {
		m.locks = map[string]*entry{}
	}
	e := m.locks[key]
	if e == nil {
		e = &entry{}
		m.locks[key] = e
	}
	e.n++
	return e
}

// leave uncounts one of e's holders or waiters and drops e with the last.
func (m *Mutex) leave(key string, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.n--; e.n == 0 {
		delete(m.locks, key)
	}
}

// unlocker returns the unlock of e, held: its first call unlocks.
func (m *Mutex) unlocker(key string, e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Unlock()
			m.leave(key, e)
		})
	}
}
