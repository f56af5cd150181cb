package agentlink

import (
	"errors"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The agent writer. A link's requests and terminal input wait in queues
// of the link (they outlive a connection: what the writer of a lost one
// did not take, the next one's writes); each connection has a writer that
// runs on a goroutine only while there is something to write (wire.Pump):
// a request, input, stream traffic, a ping, the connection's or the
// thread's end. An idle thread's agent connection has one goroutine, its
// reader.
const (
	// RequestQueueLen bounds the requests, and the input frames, waiting
	// for the writer; a sender finding its queue full waits for room
	// (Send, SendInput). The queues hold no room until items wait.
	RequestQueueLen = 16
	// inputBudget bounds the bytes of input frames waiting: never less
	// than RequestQueueLen frames, so the item bound is the one that
	// counts, as for a channel of frames.
	inputBudget = RequestQueueLen * wire.MaxTerminalFrame
)

// Why Send and SendInput did not queue.
var (
	// ErrThreadEnded: the thread ended while the sender waited.
	ErrThreadEnded = errors.New("thread closed")
	// ErrAgentBusy: the writer took nothing for the whole wait.
	ErrAgentBusy = errors.New("the agent is not accepting requests")
)

func newRequests(kick func()) *wire.Queue[wire.Envelope] {
	q := wire.NewQueue[wire.Envelope](RequestQueueLen, 0)
	q.OnPush(kick)
	return q
}

func newInput(kick func()) *wire.Queue[wire.Envelope] {
	q := wire.NewQueue[wire.Envelope](RequestQueueLen, inputBudget)
	q.OnPush(kick)
	return q
}

// Send queues env, a request for the agent, for the writer. When the
// writer is idle, env is written right away on the caller's goroutine, as
// much of it as the socket takes at once (wire.Pump.TryKick); the caller
// must hold no lock. When the queue is full it waits for room, at most
// wait (no bound when wait is 0). It fails with ErrAgentGone when the
// agent connection has ended (or ends while it waits), ErrThreadEnded when the thread ends, ErrAgentBusy
// when wait passes. While the fleet replaces the sandbox on purpose (an
// image update, its lifetime), an ended connection is waited out, at most
// wait, and env goes to the next one. It is safe for concurrent use.
func (l *Link) Send(env wire.Envelope, wait time.Duration) error {
	err := l.enqueue(l.requests, func() bool { return l.requests.Put(env) }, l.liveDead(wait), wait)
	if err == nil {
		c := l.live.Load()
		c.pump.TryKick(c.try)
	}
	return err
}

// SendInput queues a terminal input frame for the writer, as Send does a
// request; the link keeps frame until it is written.
func (l *Link) SendInput(frame []byte, wait time.Duration) error {
	return l.enqueue(l.input, func() bool { return l.input.Offer(frame) }, l.liveDead(wait), wait)
}

// liveDead is Dead, after waiting (at most wait, when above zero) for a
// planned replacement under way (replacedLoss) to install the next
// connection when the current one has ended.
func (l *Link) liveDead(wait time.Duration) <-chan struct{} {
	l.mu.Lock()
	dead, replacing := l.cur.dead, l.replacing
	l.mu.Unlock()
	select {
	case <-dead:
	default:
		return dead
	}
	if replacing == nil || wait <= 0 {
		return dead
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-replacing:
	case <-t.C:
	case <-l.ctx.Done():
	}
	return l.Dead()
}

// enqueue runs put until it takes its item, waiting for q to have room
// between tries (see Send); a nil dead never ends the wait.
func (l *Link) enqueue(q *wire.Queue[wire.Envelope], put func() bool, dead <-chan struct{}, wait time.Duration) error {
	select {
	case <-dead:
		return ErrAgentGone
	default:
	}
	if put() {
		return nil
	}
	w := wire.NewWaker()
	q.Watch(w) // before the next try: a release after it wakes us
	defer q.Unwatch(w)
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for !put() {
		select {
		case <-w.C():
		case <-dead:
			return ErrAgentGone
		case <-l.ctx.Done():
			return ErrThreadEnded
		case <-timeout:
			return ErrAgentBusy
		}
	}
	return nil
}

// kick has the current connection's writer look at the queues.
func (l *Link) kick() { l.live.Load().pump.Kick() }

// write is one run of c's writer (wire.Pump): it asks the agent to resume
// first (resume.go), then writes queued requests, stream traffic, input
// frames and pings, one of each in turn, until nothing waits (false), or
// c is finished (true): its reader ended, the thread ended (the writer
// sends the agent a close frame), or a write failed. It closes the
// connection when it finishes.
func (l *Link) write(c *connection) (finished bool) {
	if c.tc != nil {
		if err := c.tc.Flush(writeWait); err != nil { // what a try left
			l.log.Warn("write to agent", "err", err)
			return l.endWriter(c)
		}
	}
	if !c.greeted {
		c.greeted = true
		if err := writeEnvelope(c.ws, l.resumeRequest()); err != nil {
			l.log.Warn("ask agent to resume", "err", err)
			return l.endWriter(c)
		}
	}
	for {
		select {
		case <-c.dead:
			return l.endWriter(c)
		case <-l.ctx.Done():
			msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "thread closed")
			_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
			return l.endWriter(c)
		default:
		}
		busy, err := l.writeNext(c)
		if err != nil {
			return l.endWriter(c)
		}
		if c.pump.Ticked() {
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				l.log.Warn("ping agent", "err", err)
				return l.endWriter(c)
			}
		}
		if !busy {
			return false
		}
	}
}

// tryWrite is c's writer's run on a sender's goroutine (wire.Pump.TryKick):
// it writes waiting requests without ever waiting for the socket, and
// reports whether the writer has more to do. It leaves everything else to
// the writer: the resume request, stream traffic, input, pings, the end.
func (l *Link) tryWrite(c *connection) (more bool) {
	if c.tc == nil || !c.greeted {
		return true
	}
	select {
	case <-c.dead:
		return true
	case <-l.ctx.Done():
		return true
	default:
	}
	c.tc.Try(true)
	defer c.tc.Try(false)
	for !c.tc.Blocked() {
		it, ok := l.requests.TryNext()
		if !ok {
			return false
		}
		if err := l.writeRequest(c, it); err != nil {
			return true // the writer's Flush meets the error and ends it
		}
	}
	return true
}

// writeNext writes the next request, the next stream item and the next
// input frame, those that wait, and reports whether any did. A failed
// write is logged here.
func (l *Link) writeNext(c *connection) (busy bool, err error) {
	if it, ok := l.requests.TryNext(); ok {
		busy = true
		if err := l.writeRequest(c, it); err != nil {
			return busy, err
		}
	}
	if q := l.streams.pending(); q != nil {
		if it, ok := q.TryNext(); ok {
			busy = true
			if err := l.streams.write(c, it); err != nil {
				l.log.Warn("write stream traffic to agent", "err", err)
				return busy, err
			}
		}
	}
	if it, ok := l.input.TryNext(); ok {
		busy = true
		l.input.Release(it)
		if err := (wire.Writer{Conn: c.ws, Wait: writeWait}).Binary(it.Frame); err != nil {
			l.log.Warn("write terminal input to agent", "err", err)
			return busy, err
		}
	}
	return busy, nil
}

// writeRequest writes a request taken from the queue (a stream's is
// refused: streams are the bridge's own). A failed write is logged here.
func (l *Link) writeRequest(c *connection, it wire.Item[wire.Envelope]) error {
	l.requests.Release(it)
	env := *it.Msg
	if wire.IsStream(env.Type) { // streams.go
		l.refuseStream(env)
		return nil
	}
	if startsWork(env.Type) {
		l.sent.add(env, c.n) // before the agent can answer it (inflight.go)
	}
	if err := writeEnvelope(c.ws, env); err != nil {
		l.log.Warn("write to agent", "err", err)
		return err
	}
	return nil
}

// endWriter finishes c's writer: it closes the connection (its reader
// then ends), stops the kick on the thread's end, and no longer counts
// in Config.Group; c.pump.Done() closes next.
func (l *Link) endWriter(c *connection) (finished bool) {
	c.ws.Close()
	c.stopCtx()
	l.cfg.Group.Done()
	return true
}
