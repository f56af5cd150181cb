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
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*entry{}
	}
	e := m.locks[key]
	if e == nil {
		e = &entry{}
		m.locks[key] = e
	}
	e.n++
	m.mu.Unlock()

	e.mu.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Unlock()
			m.mu.Lock()
			if e.n--; e.n == 0 {
				delete(m.locks, key)
			}
			m.mu.Unlock()
		})
	}
}
