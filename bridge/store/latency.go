package store

import (
	"sync"
	"time"
)

// AppendBuckets are the upper bounds, in seconds, of the buckets of
// AppendLatency.
var AppendBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Latency is a histogram of how long appended events waited from Append
// (or AppendNext) until their commit: the group commit's latency, which
// a client waits for before it sees an event (GET /metrics).
type Latency struct {
	// Bounds are the buckets' upper bounds in seconds (AppendBuckets);
	// Counts has one more entry, for the events above the last bound.
	// Counts are per bucket, not cumulative.
	Bounds []float64
	Counts []uint64
	// Sum is the seconds of all Count events.
	Sum   float64
	Count uint64
}

// latency is a Writer's Latency, safe for concurrent use.
type latency struct {
	mu sync.Mutex
	h  Latency
}

func (l *latency) observe(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h.Counts == nil {
		l.h.Bounds, l.h.Counts = AppendBuckets, make([]uint64, len(AppendBuckets)+1)
	}
	s := d.Seconds()
	i := 0
	for i < len(l.h.Bounds) && s > l.h.Bounds[i] {
		i++
	}
	l.h.Counts[i]++
	l.h.Sum += s
	l.h.Count++
}

func (l *latency) snapshot() Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	h.Counts = append([]uint64(nil), l.h.Counts...)
	if h.Counts == nil {
		h.Bounds, h.Counts = AppendBuckets, make([]uint64, len(AppendBuckets)+1)
	}
	return h
}

// AppendLatency is the latency of the events committed so far.
func (w *Writer) AppendLatency() Latency { return w.lat.snapshot() }

// AppendLatency is the latency of the events this store committed since
// it opened (the writer's).
func (s *Store) AppendLatency() Latency { return s.w.AppendLatency() }
