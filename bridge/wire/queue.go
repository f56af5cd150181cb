package wire

import "sync/atomic"

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

// Queue is a connection's terminal queue: control messages and output
// frames in the order they were queued, at most a fixed number of items,
// and frames of at most budget bytes in all. Send and Offer never block
// and are safe for concurrent use; the queue has one consumer, which
// receives from Items and calls Release for every item it took. Watch,
// Unwatch and Wake (from Watchers) let a producer wait for room: Release
// wakes the Wakers watching.
type Queue[M any] struct {
	Watchers
	items  chan Item[M]
	budget int64
	bytes  atomic.Int64 // bytes of frames queued and not yet released
}

// NewQueue returns an empty queue of at most items entries and budget
// bytes of frames.
func NewQueue[M any](items int, budget int64) *Queue[M] {
	return &Queue[M]{items: make(chan Item[M], items), budget: budget}
}

// Send queues m after everything queued before it. It reports false, and
// queues nothing, when the queue holds its maximum of items: the consumer
// is too slow, and the caller should drop the connection rather than lose
// m silently. A control message does not count against the byte budget.
func (q *Queue[M]) Send(m M) bool {
	select {
	case q.items <- Item[M]{Msg: &m}:
		return true
	default:
		return false
	}
}

// Offer queues frame unless that would pass the byte budget or the item
// bound, and reports whether it did. The queue keeps frame until the
// consumer releases it; the caller must not change it.
func (q *Queue[M]) Offer(frame []byte) bool {
	n := int64(len(frame))
	if q.bytes.Load()+n > q.budget {
		return false
	}
	select {
	case q.items <- Item[M]{Frame: frame}:
		q.bytes.Add(n)
		return true
	default:
		return false
	}
}

// Items is the consumer's channel. Every item received from it must be
// given to Release.
func (q *Queue[M]) Items() <-chan Item[M] { return q.items }

// TryNext takes the next item without waiting; ok is false when the queue
// is empty. The item must be given to Release, as one from Items.
func (q *Queue[M]) TryNext() (it Item[M], ok bool) {
	select {
	case it = <-q.items:
		return it, true
	default:
		return it, false
	}
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
func (q *Queue[M]) Len() int { return len(q.items) }
