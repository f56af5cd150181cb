package wire

import (
	"sync"
	"sync/atomic"
)

// TerminalBudget is the byte budget of a connection's terminal queue, the
// same in the agent and the bridge: 8 MiB of output frames may wait for a
// writer before its connection counts as full.
const TerminalBudget = 8 << 20

// Item is one queued entry: a control message (Msg set) or an output frame.
type Item[M any] struct {
	// Msg is the control message, nil for a frame.
	Msg *M
	// Frame is the encoded output frame when Msg is nil.
	Frame []byte
}

// Queue is a connection's outgoing queue: control messages and output
// frames in the order they were queued, at most a fixed number of items,
// and frames of at most budget bytes in all. Send and Offer never block
// and are safe for concurrent use; the queue has one consumer, which
// takes items with TryNext and calls Release for every item it took,
// and learns that items wait either by waiting on Ready or from the
// function given to OnPush (a Pump's Kick: the writer then runs only
// while items wait). Watch, Unwatch and Wake (from Watchers) let a
// producer wait for room: Release wakes the Wakers watching.
//
// The queue holds no room until items arrive: its ring grows with what
// waits (doubling, up to the item bound) and is given back once the
// consumer has emptied it, so an idle connection's queue costs a few
// words, not its bound (most connections never queue more than a few
// items; a channel's buffer would be allocated whole).
type Queue[M any] struct {
	Watchers
	mu     sync.Mutex
	ring   []Item[M] // len is a power of two or zero
	head   int       // index of the oldest item in ring
	n      int       // items waiting
	max    int
	ready  chan struct{} // holds a token while items wait; made by the first Ready
	pushed func()        // OnPush's: called after every item queued
	budget int64
	bytes  atomic.Int64 // bytes of frames queued and not yet released
}

// NewQueue returns an empty queue of at most items entries and budget
// bytes of frames.
func NewQueue[M any](items int, budget int64) *Queue[M] {
	return &Queue[M]{max: items, budget: budget}
}

// OnPush has f called after every item Send or Offer queues, on the
// producer's goroutine and outside the queue's lock; f must not block.
// Call it before the queue is shared.
func (q *Queue[M]) OnPush(f func()) { q.pushed = f }

// Send queues m after everything queued before it. It reports false, and
// queues nothing, when the queue holds its maximum of items: the consumer
// is too slow, and the caller should drop the connection rather than lose
// m silently. A control message does not count against the byte budget.
func (q *Queue[M]) Send(m M) bool {
	return q.push(Item[M]{Msg: &m})
}

// Put is Send without OnPush's call: for a sender that has the
// consumer look at the queue itself next (Pump.TryKick).
func (q *Queue[M]) Put(m M) bool {
	return q.pushQuiet(Item[M]{Msg: &m})
}

// Offer queues frame unless that would pass the byte budget or the item
// bound, and reports whether it did. The queue keeps frame until the
// consumer releases it; the caller must not change it.
func (q *Queue[M]) Offer(frame []byte) bool {
	n := int64(len(frame))
	if q.bytes.Load()+n > q.budget {
		return false
	}
	if !q.push(Item[M]{Frame: frame}) {
		return false
	}
	q.bytes.Add(n)
	return true
}

// push appends it unless the queue is full, growing the ring as needed,
// and leaves the consumer a token.
func (q *Queue[M]) push(it Item[M]) bool {
	if !q.pushQuiet(it) {
		return false
	}
	if q.pushed != nil {
		q.pushed()
	}
	return true
}

// pushQuiet is push without OnPush's call.
func (q *Queue[M]) pushQuiet(it Item[M]) bool {
	q.mu.Lock()
	if q.n >= q.max {
		q.mu.Unlock()
		return false
	}
	if q.n == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = it
	q.n++
	ready := q.ready
	q.mu.Unlock()
	if ready != nil {
		select {
		case ready <- struct{}{}:
		default: // a token is already there
		}
	}
	return true
}

// grow doubles the ring (from 4), keeping the order; q.mu is held.
func (q *Queue[M]) grow() {
	size := max(4, 2*len(q.ring))
	ring := make([]Item[M], size)
	for i := range q.n {
		ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
	}
	q.ring, q.head = ring, 0
}

// Ready is ready to receive from while items may wait: the consumer
// selects on it and then calls TryNext (which leaves a token again when
// more items wait, so taking one item per receive is enough). The
// channel is made by the first call: a queue drained through OnPush
// never has one.
func (q *Queue[M]) Ready() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ready == nil {
		q.ready = make(chan struct{}, 1)
		if q.n > 0 {
			q.ready <- struct{}{}
		}
	}
	return q.ready
}

// TryNext takes the next item without waiting; ok is false when the queue
// is empty. The item must be given to Release.
func (q *Queue[M]) TryNext() (it Item[M], ok bool) {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return it, false
	}
	var zero Item[M]
	it, q.ring[q.head] = q.ring[q.head], zero
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.n--
	more := q.n > 0
	if !more && len(q.ring) > 16 {
		q.ring, q.head = nil, 0 // a burst's room goes back once it drained
	}
	ready := q.ready
	q.mu.Unlock()
	if more && ready != nil {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	return it, true
}

// Release gives back the room it held and wakes the producers watching
// for room. The consumer calls it once per item taken, before or after
// writing it out.
func (q *Queue[M]) Release(it Item[M]) {
	if n := len(it.Frame); n > 0 {
		q.bytes.Add(-int64(n))
	}
	q.Wake()
}

// Bytes reports how many bytes of frames wait in the queue.
func (q *Queue[M]) Bytes() int64 { return q.bytes.Load() }

// Len reports how many items wait in the queue.
func (q *Queue[M]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
