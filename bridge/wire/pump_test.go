package wire_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// pumped is a queue drained by a pump into a log of what was written, as
// a connection's writer drains its queue to the connection.
type pumped struct {
	q    *wire.Queue[[2]int] // pusher, number
	pump *wire.Pump

	running atomic.Int32 // writers in write now
	most    atomic.Int32 // the most ever at once
	runs    atomic.Int64 // calls of write
	tries   atomic.Int64 // calls of try
	stop    atomic.Bool  // write reports the connection finished
	yield   bool         // write yields after each item
	linger  int          // times write yields once drained, before it returns

	mu      sync.Mutex
	written [][2]int
}

func newPumped(items int) *pumped {
	p := &pumped{q: wire.NewQueue[[2]int](items, 0)}
	p.pump = wire.NewPump(p.write, 0)
	p.q.OnPush(p.pump.Kick)
	return p
}

// write takes everything queued, one item at a time (yielding between
// items if p.yield, so that pushers overtake it), and returns when it
// found the queue empty (lingering first if p.linger: the window between
// "drained" and "exited" is what a lost push would fall into).
func (p *pumped) write() bool {
	defer p.enter()()
	p.runs.Add(1)
	if p.stop.Load() {
		return true
	}
	for {
		it, ok := p.q.TryNext()
		if !ok {
			for range p.linger { // drained, on its way out: pushes land now
				runtime.Gosched()
			}
			return false
		}
		p.q.Release(it)
		p.mu.Lock()
		p.written = append(p.written, *it.Msg)
		p.mu.Unlock()
		if p.yield {
			runtime.Gosched()
		}
	}
}

// enter counts a writer in (running, most) and returns its way out.
func (p *pumped) enter() (leave func()) {
	n := p.running.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { p.running.Add(-1) }
}

// try is a try (Pump.TryKick) on the pusher's goroutine: it writes at
// most two items, counted as a writer like write, and reports more when
// it left any.
func (p *pumped) try() (more bool) {
	defer p.enter()()
	p.tries.Add(1)
	for range 2 {
		it, ok := p.q.TryNext()
		if !ok {
			return false
		}
		p.q.Release(it)
		p.mu.Lock()
		p.written = append(p.written, *it.Msg)
		p.mu.Unlock()
	}
	return true
}

func (p *pumped) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.written)
}

// waitIdle waits until the pump runs no writer and n items are written.
func (p *pumped) waitIdle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !p.pump.Idle() || p.count() < n || p.q.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pump not idle: %d of %d written, %d queued, idle %v", p.count(), n, p.q.Len(), p.pump.Idle())
		}
		time.Sleep(time.Millisecond)
	}
}

// Many pushers, each pushing in bursts with pauses, against a writer that
// ends whenever it drains the queue: every item is written once, each
// pusher's in order, no writer ever runs beside another, and once the
// pushers are done no writer goroutine is left (goleak in TestMain) and
// nothing is left queued. A fast writer drains and exits between bursts
// (the exit meets the next push); a slow one is overtaken and runs on.
//
// With tries, half the pushers Put and TryKick: their items are often
// written on their own goroutines (a try writes two at most, then hands
// over), and still never beside a writer or another try.
func TestPumpManyPushers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		slow     bool
		mustExit bool
		tries    bool
	}{{"fast writer", false, true, false}, {"slow writer", true, false, false}, {"fast writer with tries", false, true, true}, {"slow writer with tries", true, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			manyPushers(t, tc.slow, tc.mustExit, tc.tries)
		})
	}
}

func manyPushers(t *testing.T, slow, mustExit, tries bool) {
	const pushers, each = 16, 2000
	p := newPumped(pushers * each)
	p.yield = slow
	if !slow {
		p.linger = 2
	}
	p.pump.Start()
	var idleSeen atomic.Int64 // pushes that found no writer running
	var wg sync.WaitGroup
	for w := range pushers {
		wg.Go(func() {
			for i := range each {
				if p.pump.Idle() {
					idleSeen.Add(1)
				}
				if tries && w%2 == 1 {
					if !p.q.Put([2]int{w, i}) {
						t.Errorf("pusher %d: queue full at %d", w, i)
						return
					}
					p.pump.TryKick(p.try)
				} else if !p.q.Send([2]int{w, i}) {
					t.Errorf("pusher %d: queue full at %d", w, i)
					return
				}
				switch {
				case i%(5+w) == 0:
					time.Sleep(time.Duration(w%3) * 20 * time.Microsecond) // the writer may drain and exit
				case i%3 == 0:
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	p.waitIdle(t, pushers*each)
	if m := p.most.Load(); m != 1 {
		t.Fatalf("%d writers ran at once", m)
	}
	next := make([]int, pushers)
	for _, it := range p.written {
		if w, i := it[0], it[1]; i != next[w] {
			t.Fatalf("pusher %d: got item %d, want %d", w, i, next[w])
		}
		next[it[0]]++
	}
	for w, n := range next {
		if n != each {
			t.Fatalf("pusher %d: %d of %d written", w, n, each)
		}
	}
	if mustExit && idleSeen.Load() == 0 {
		t.Fatalf("the writer never exited between pushes (%d runs): the race was not exercised", p.runs.Load())
	}
	if tries && mustExit && p.tries.Load() == 0 {
		t.Fatalf("no try ran (%d runs): TryKick never found the writer idle", p.runs.Load())
	}
	t.Logf("%d writer runs and %d tries for %d items; %d pushes found no writer", p.runs.Load(), p.tries.Load(), pushers*each, idleSeen.Load())
}

// A push right after each drain, many times over: the writer on its way
// out and the next push meet at the moment the test is about.
func TestPumpPushAfterDrain(t *testing.T) {
	t.Parallel()
	const rounds = 20000
	p := newPumped(rounds)
	p.linger = 2
	p.pump.Start()
	deadline := time.Now().Add(waitFor)
	for i := range rounds {
		p.q.Send([2]int{0, i})
		for p.count() <= i { // written: the writer is now on its way out, or gone
			if time.Now().After(deadline) {
				t.Fatalf("item %d never written", i)
			}
			runtime.Gosched()
		}
	}
	p.waitIdle(t, rounds)
	if m := p.most.Load(); m != 1 {
		t.Fatalf("%d writers ran at once", m)
	}
	for i, it := range p.written {
		if it[1] != i {
			t.Fatalf("item %d is %d", i, it[1])
		}
	}
}

// TryKick on an idle pump runs the try on the caller's goroutine, and
// no writer when the try found nothing more; a try that leaves more has a
// writer run after it; on a pump not yet started it runs nothing.
func TestPumpTryKick(t *testing.T) {
	t.Parallel()
	p := newPumped(8)
	p.q.Put([2]int{0, 0})
	p.pump.TryKick(p.try) // held: nothing runs
	if p.tries.Load() != 0 || p.runs.Load() != 0 {
		t.Fatalf("before Start: %d tries, %d runs", p.tries.Load(), p.runs.Load())
	}
	p.pump.Start()
	p.waitIdle(t, 1)
	runs := p.runs.Load()

	p.q.Put([2]int{0, 1})
	p.pump.TryKick(p.try)
	if p.tries.Load() != 1 || p.count() != 2 { // written here, before TryKick returned
		t.Fatalf("idle pump: %d tries, %d written", p.tries.Load(), p.count())
	}
	if !p.pump.Idle() {
		t.Fatal("a writer runs after a try that left nothing")
	}
	time.Sleep(10 * time.Millisecond)
	if p.runs.Load() != runs {
		t.Fatalf("the writer ran after a try that left nothing (%d runs, then %d)", runs, p.runs.Load())
	}

	for i := range 5 { // more than a try takes
		p.q.Put([2]int{0, 2 + i})
	}
	p.pump.TryKick(p.try)
	p.waitIdle(t, 7)
	if p.tries.Load() != 2 || p.runs.Load() != runs+1 {
		t.Fatalf("a try that left more: %d tries, %d runs after %d", p.tries.Load(), p.runs.Load(), runs)
	}
	for i, it := range p.written {
		if it[1] != i {
			t.Fatalf("item %d is %d", i, it[1])
		}
	}
}

// Kicks before Start run nothing; Start runs the writer once, which sees
// what they queued.
func TestPumpHeldUntilStart(t *testing.T) {
	t.Parallel()
	p := newPumped(8)
	p.q.Send([2]int{0, 0})
	p.pump.Kick()
	time.Sleep(10 * time.Millisecond)
	if p.runs.Load() != 0 || !p.pump.Idle() {
		t.Fatalf("ran %d times before Start", p.runs.Load())
	}
	p.pump.Start()
	p.waitIdle(t, 1)
}

// A writer that reports the connection finished ends the pump: Done
// closes and later kicks run nothing.
func TestPumpFinished(t *testing.T) {
	t.Parallel()
	p := newPumped(8)
	p.pump.Start()
	p.waitIdle(t, 0)
	p.stop.Store(true)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(p.pump.Kick)
	}
	wg.Wait()
	select {
	case <-p.pump.Done():
	case <-time.After(waitFor):
		t.Fatal("Done not closed")
	}
	runs := p.runs.Load()
	p.q.Send([2]int{0, 1})
	p.pump.Kick()
	time.Sleep(10 * time.Millisecond)
	if got := p.runs.Load(); got != runs || !p.pump.Idle() {
		t.Fatalf("ran after finishing: %d runs, then %d", runs, got)
	}
}

// A ticking pump kicks its writer every period, with nothing queued, and
// stops ticking when it finishes.
func TestPumpTicks(t *testing.T) {
	t.Parallel()
	var ticks atomic.Int32
	var finish atomic.Bool
	var pump *wire.Pump
	pump = wire.NewPump(func() bool {
		if pump.Ticked() && ticks.Add(1) >= 3 {
			finish.Store(true)
		}
		return finish.Load()
	}, 5*time.Millisecond)
	pump.Start()
	select {
	case <-pump.Done():
	case <-time.After(waitFor):
		t.Fatalf("%d ticks", ticks.Load())
	}
	time.Sleep(20 * time.Millisecond)
	if n := ticks.Load(); n != 3 {
		t.Fatalf("%d ticks", n)
	}
}
