package fleet

import "github.com/boxwire/boxwire/bridge/fleet/warm"

// Counts are how many sandboxes of a fleet are in each state at one
// moment (GET /metrics).
type Counts struct {
	// Starting are being made: for a thread (a new one, or a pooled one
	// being claimed) or for the warm pool.
	Starting int
	// Running are made and serve their threads (whose starts may still
	// be going on).
	Running int
	// Pool are started and greeted in the warm pool, no thread's yet.
	Pool int
}

// Counts counts f's sandboxes now. It asks no engine and holds only the
// fleet's mutex; it is safe for concurrent use.
func (f *Fleet) Counts() Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	var c Counts
	for _, b := range f.boxes {
		select {
		case <-b.ready:
			if b.err == nil {
				c.Running++
			}
		default:
			c.Starting++
		}
	}
	if f.pool.ReadyLocked(func(_ warm.Key, ready []*Box) { c.Pool += len(ready) }) {
		c.Starting++ // the one the pool starts
	}
	return c
}
