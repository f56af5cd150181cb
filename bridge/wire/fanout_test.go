package wire_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// drainer consumes q, one item at a time while open is set.
type drainer struct {
	q     *wire.Queue[string]
	bytes atomic.Int64
	open  chan struct{} // closed: consume
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newDrainer(t *testing.T, q *wire.Queue[string], open bool) *drainer {
	d := &drainer{q: q, open: make(chan struct{}), stop: make(chan struct{})}
	if open {
		close(d.open)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		select {
		case <-d.open:
		case <-d.stop:
			return
		}
		for {
			select {
			case <-q.Ready():
				it, ok := q.TryNext()
				if !ok {
					continue
				}
				q.Release(it)
				d.bytes.Add(int64(len(it.Frame)))
			case <-d.stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(d.stop); d.wg.Wait() })
	return d
}

func full(t *testing.T, budget int64) *wire.Queue[string] {
	q := wire.NewQueue[string](16, budget)
	if !q.Offer(make([]byte, budget)) {
		t.Fatal("refused")
	}
	return q
}

func TestDeliverAllTake(t *testing.T) {
	t.Parallel()
	f := wire.Fanout[*wire.Queue[string]]{StallLimit: waitFor, LagGrace: waitFor}
	a, b := wire.NewQueue[string](4, 100), wire.NewQueue[string](4, 100)
	if slow := f.Deliver(nil, []*wire.Queue[string]{a, b}, []byte("x")); slow != nil {
		t.Fatalf("slow %v", slow)
	}
	if a.Len() != 1 || b.Len() != 1 {
		t.Fatal("not delivered to both")
	}
}

func TestDeliverWokenByDrain(t *testing.T) {
	t.Parallel()
	f := wire.Fanout[*wire.Queue[string]]{StallLimit: waitFor, LagGrace: waitFor}
	q := full(t, 8)
	d := newDrainer(t, q, false)
	time.AfterFunc(20*time.Millisecond, func() { close(d.open) })
	began := time.Now()
	if slow := f.Deliver(nil, []*wire.Queue[string]{q}, []byte("x")); slow != nil {
		t.Fatal("a queue that drained was called too slow")
	}
	if took := time.Since(began); took > waitFor/2 {
		t.Fatalf("woken after %v", took)
	}
}

func TestDeliverLaggingTargetSlow(t *testing.T) {
	t.Parallel()
	const grace = 50 * time.Millisecond
	f := wire.Fanout[*wire.Queue[string]]{StallLimit: waitFor, LagGrace: grace}
	fast, stuck := wire.NewQueue[string](4, 100), full(t, 8)
	began := time.Now()
	slow := f.Deliver(nil, []*wire.Queue[string]{fast, stuck}, []byte("x"))
	if len(slow) != 1 || slow[0] != stuck {
		t.Fatalf("slow %v", slow)
	}
	if took := time.Since(began); took < grace || took > waitFor/2 {
		t.Fatalf("gave up after %v; lag grace %v", took, grace)
	}
}

func TestDeliverStallLimit(t *testing.T) {
	t.Parallel()
	const stall = 50 * time.Millisecond
	f := wire.Fanout[*wire.Queue[string]]{StallLimit: stall, LagGrace: time.Millisecond}
	stuck := full(t, 8)
	for range 3 { // the Fanout's timer and Waker are reused
		began := time.Now()
		if slow := f.Deliver(nil, []*wire.Queue[string]{stuck}, []byte("x")); len(slow) != 1 {
			t.Fatalf("slow %v", slow)
		}
		if took := time.Since(began); took < stall {
			t.Fatalf("gave up after %v; stall limit %v", took, stall)
		}
	}
}

// probe is a Target in front of a Queue that counts its watches.
type probe struct {
	*wire.Queue[string]
	watching atomic.Int32
}

func (p *probe) Watch(w *wire.Waker)   { p.watching.Add(1); p.Queue.Watch(w) }
func (p *probe) Unwatch(w *wire.Waker) { p.watching.Add(-1); p.Queue.Unwatch(w) }

func TestDeliverDone(t *testing.T) {
	t.Parallel()
	f := wire.Fanout[*probe]{StallLimit: waitFor, LagGrace: waitFor}
	stuck := &probe{Queue: full(t, 8)}
	done := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(done) })
	if slow := f.Deliver(done, []*probe{stuck}, []byte("x")); slow != nil {
		t.Fatalf("slow %v after done", slow)
	}
	if n := stuck.watching.Load(); n != 0 {
		t.Fatalf("still watching %d times after Deliver", n)
	}
}

func TestDeliverUnwatches(t *testing.T) {
	t.Parallel()
	f := wire.Fanout[*probe]{StallLimit: 50 * time.Millisecond, LagGrace: 20 * time.Millisecond}
	taker, stuck := &probe{Queue: full(t, 8)}, &probe{Queue: full(t, 8)}
	newDrainer(t, taker.Queue, true)
	if slow := f.Deliver(nil, []*probe{taker, stuck}, []byte("x")); len(slow) != 1 || slow[0] != stuck {
		t.Fatalf("slow %v", slow)
	}
	if taker.watching.Load() != 0 || stuck.watching.Load() != 0 {
		t.Fatalf("watches left: %d, %d", taker.watching.Load(), stuck.watching.Load())
	}
}

func TestDeliverNoAllocations(t *testing.T) {
	f := wire.Fanout[*wire.Queue[string]]{StallLimit: waitFor, LagGrace: waitFor}
	a, b := wire.NewQueue[string](4, 100), wire.NewQueue[string](4, 100)
	targets := make([]*wire.Queue[string], 2)
	frame := []byte("x")
	allocs := testing.AllocsPerRun(100, func() {
		targets[0], targets[1] = a, b
		f.Deliver(nil, targets, frame)
		for _, q := range [...]*wire.Queue[string]{a, b} {
			it, _ := q.TryNext()
			q.Release(it)
		}
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per delivery", allocs)
	}
}

// TestDeliverUnderLoad: several fan-outs (one per session) feed the same
// slow queues at once; every byte arrives, and no queue is called too
// slow while its consumer keeps going.
func TestDeliverUnderLoad(t *testing.T) {
	t.Parallel()
	const (
		producers = 4
		frames    = 2000
		size      = 1024
	)
	queues := make([]*wire.Queue[string], 3)
	drainers := make([]*drainer, len(queues))
	for i := range queues {
		queues[i] = wire.NewQueue[string](8, 4*size)
		drainers[i] = newDrainer(t, queues[i], true)
	}
	var wg sync.WaitGroup
	var slowSeen atomic.Int32
	for range producers {
		wg.Go(func() {
			f := wire.Fanout[*wire.Queue[string]]{StallLimit: waitFor, LagGrace: waitFor}
			frame := make([]byte, size)
			for range frames {
				targets := append([]*wire.Queue[string](nil), queues...)
				if slow := f.Deliver(nil, targets, frame); len(slow) > 0 {
					slowSeen.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := slowSeen.Load(); n > 0 {
		t.Fatalf("%d deliveries found a consuming queue too slow", n)
	}
	want := int64(producers * frames * size)
	deadline := time.Now().Add(waitFor)
	for i, d := range drainers {
		for d.bytes.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("queue %d got %d bytes, want %d", i, d.bytes.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestDeliverConcurrentCallers: two callers of one Fanout wait for the
// same full queue at once; a drain wakes both.
func TestDeliverConcurrentCallers(t *testing.T) {
	t.Parallel()
	var f wire.Fanout[*wire.Queue[string]]
	f.StallLimit, f.LagGrace = waitFor, waitFor
	q := full(t, 8)
	d := newDrainer(t, q, false)
	var wg sync.WaitGroup
	var slow atomic.Int32
	for range 2 {
		wg.Go(func() {
			if len(f.Deliver(nil, []*wire.Queue[string]{q}, []byte("x"))) > 0 {
				slow.Add(1)
			}
		})
	}
	time.AfterFunc(20*time.Millisecond, func() { close(d.open) })
	wg.Wait()
	if slow.Load() > 0 {
		t.Fatal("a caller gave up on a queue that drained")
	}
}
