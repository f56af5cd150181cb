package wire

import (
	"math"
	"sync/atomic"
	"time"
)

// Pump runs a connection's writer on a goroutine only while the writer
// has work: an idle connection keeps no writer goroutine, and so no
// writer stack. The producers Kick it after each thing they queue (a
// Queue's OnPush, a wake-up, a close); the pump then runs its writer
// function on a goroutine, which takes what waits, writes it, and lets
// go of the connection once it finds nothing more. A Kick that comes while that goroutine is
// on its way out makes it run the writer again, so nothing queued is
// left unsent, and there is never more than one writer running: the
// writer owns the connection as a pump goroutine of its own would.
//
// The goroutines that run writers are shared (runner): one that finished
// a run waits runnerLinger for another pump's, then ends. A writer's run
// grows its goroutine's stack (a JSON encoding, a WebSocket write: 8 to
// 16 KiB); a new goroutine for every run paid that growth each time, some
// microseconds a message on each hop, where a runner that stays a moment
// keeps its stack for the next run of any connection. An idle bridge
// still keeps no writer goroutine once its runners' lingers have passed.
//
// The writer reports when the connection is finished (a write failed, or
// it wrote the close): the pump then ends for good and closes Done. A
// Pump may also tick: every tick period it marks a tick (see Ticked) and
// kicks, so the writer can send its pings without a goroutine to wait
// for them.
type Pump struct {
	write  func() (finished bool)
	state  atomic.Int32
	done   chan struct{}
	period time.Duration
	tick   *time.Timer // set by Start when period > 0
	ticked atomic.Bool
}

// The states of a Pump.
const (
	pumpHeld    int32 = iota // not started: kicks are noted by the first run
	pumpIdle                 // no writer runs
	pumpRunning              // a writer runs
	pumpAgain                // a writer runs, and a kick came after it began
	pumpDone                 // finished: kicks do nothing
)

// runnerLinger is how long a runner that finished a pump's run waits for
// another before it ends.
const runnerLinger = 100 * time.Millisecond

// idleRunners hands a pump to a runner waiting for one (runner); unbuffered,
// so a pump goes only to a runner that takes it now.
var idleRunners = make(chan *Pump)

// dispatch has a runner run p: one that waits, or a new one.
func dispatch(p *Pump) {
	select {
	case idleRunners <- p:
	default:
		go runner(p)
	}
}

// runner runs p, and then the pumps dispatch hands it, until none came
// for runnerLinger.
func runner(p *Pump) {
	linger := time.NewTimer(runnerLinger)
	defer linger.Stop()
	for {
		p.run()
		linger.Reset(runnerLinger)
		select {
		case p = <-idleRunners:
		case <-linger.C:
			return
		}
	}
}

// NewPump returns a pump, not yet started, that runs write and ticks
// every tick (never, when tick is 0). write takes and writes whatever
// waits and returns when nothing does, reporting whether the connection
// is finished; it never runs on two goroutines at once, and each run
// happens after the Kicks that asked for it.
func NewPump(write func() (finished bool), tick time.Duration) *Pump {
	return &Pump{write: write, done: make(chan struct{}), period: tick}
}

// Start starts the ticks and runs the writer once; Kicks before Start do
// nothing but are seen by that first run. Start is called once.
func (p *Pump) Start() {
	if p.period > 0 {
		p.tick = time.AfterFunc(math.MaxInt64, p.onTick) // set before it can fire
		p.tick.Reset(p.period)
	}
	p.state.CompareAndSwap(pumpHeld, pumpIdle)
	p.Kick()
}

// onTick marks a tick, sets the next one and kicks.
func (p *Pump) onTick() {
	if p.state.Load() == pumpDone {
		return // a tick that raced the pump's end: no next one
	}
	p.ticked.Store(true)
	p.tick.Reset(p.period) // from its own function: tick on like a Ticker
	p.Kick()
}

// Ticked reports, for the writer, whether a tick came since it last asked.
// Ticks that come while one is pending are one tick, as a Ticker drops
// them for a slow receiver.
func (p *Pump) Ticked() bool { return p.ticked.CompareAndSwap(true, false) }

// Kick asks for a run of the writer after this call: it starts a writer
// goroutine unless one runs, and then that one runs the writer again
// before it ends. It never blocks and is safe for concurrent use; after
// the pump finished it does nothing.
func (p *Pump) Kick() {
	for {
		switch p.state.Load() {
		case pumpIdle:
			if p.state.CompareAndSwap(pumpIdle, pumpRunning) {
				dispatch(p)
				return
			}
		case pumpRunning:
			if p.state.CompareAndSwap(pumpRunning, pumpAgain) {
				return
			}
		default: // held, again or done: a run to come sees it, or none is wanted
			return
		}
	}
}

// TryKick is Kick from a producer that can lend its goroutine: when no
// writer runs, it runs try there, as the writer's run, instead of handing
// the run to a runner (a wake-up of another goroutine, and often of
// another CPU: the most of a small message's cost on its way through).
// try must never wait: it writes what it can at once (a TryConn in a try)
// and reports whether the writer has more to do. Then, or when a Kick
// came while try ran, a runner runs the writer as after a Kick. When a
// writer runs already, TryKick is Kick.
//
// The caller must hold no lock the writer takes; try runs only between
// runs of the writer, never beside one.
func (p *Pump) TryKick(try func() (more bool)) {
	for {
		switch p.state.Load() {
		case pumpIdle:
			if p.state.CompareAndSwap(pumpIdle, pumpRunning) {
				if !try() && p.state.CompareAndSwap(pumpRunning, pumpIdle) {
					return // done here: a Kick from now on dispatches p
				}
				p.state.CompareAndSwap(pumpAgain, pumpRunning)
				dispatch(p)
				return
			}
		case pumpRunning:
			if p.state.CompareAndSwap(pumpRunning, pumpAgain) {
				return
			}
		default:
			return
		}
	}
}

// run runs the writer, on a runner, until a run begins after the last
// Kick and finds nothing, or the connection is finished.
func (p *Pump) run() {
	for {
		if p.write() {
			p.state.Store(pumpDone)
			if p.tick != nil {
				p.tick.Stop()
			}
			close(p.done)
			return
		}
		if p.state.CompareAndSwap(pumpRunning, pumpIdle) {
			return // a Kick from now on dispatches p again
		}
		p.state.CompareAndSwap(pumpAgain, pumpRunning) // a Kick came during the run: run again
	}
}

// Idle reports whether no writer goroutine runs now (the pump is idle,
// not started, or finished).
func (p *Pump) Idle() bool {
	s := p.state.Load()
	return s != pumpRunning && s != pumpAgain
}

// Done is closed once the writer reported the connection finished and
// its goroutine is about to end.
func (p *Pump) Done() <-chan struct{} { return p.done }
