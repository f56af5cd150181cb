package server

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/agentlink"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Terminal relay (docs/terminal.md). The agent keeps the sessions and their
// screens; the bridge's one agent connection is attached to every session a
// client of the thread attached, and the bridge fans the output frames out
// to the clients attached to each session. Each client has a terminal queue
// of its own beside its events, bounded in bytes (wire.Queue): while every
// client of a session is full the relay waits (wire.Fanout, woken when a
// client's writer drains its queue or the client is kicked), which holds the
// agent connection, and so paces the program; a client that stays full while another keeps up, or
// for termStallLimit, is detached with terminal_detached too_slow and may
// attach again for a fresh screen.
const (
	// termBudget is how many bytes of output frames may wait for one client.
	termBudget = wire.TerminalBudget
	// termQueueLen bounds the queued terminal items of one client: 512
	// hold 2 MiB of 4 KiB frames, plenty for the relay. Every client has
	// the queue, terminal or not; it holds no room until frames wait
	// (wire.Queue grows with use).
	termQueueLen = 512
	// termStallLimit bounds waiting for clients that are all full.
	termStallLimit = 10 * time.Second
	// termLagGrace is how long a full client may lag behind one that keeps up.
	termLagGrace = time.Second
	// maxInputFrame bounds a client's binary frame.
	maxInputFrame = wire.MaxTerminalFrame
)

// termQueue is a client's terminal queue (control messages and output
// frames, see wire.Queue); its writer drains it.
type termQueue struct {
	term *wire.Queue[wire.Envelope]
}

func newTermQueue() termQueue {
	return termQueue{term: wire.NewQueue[wire.Envelope](termQueueLen, termBudget)}
}

// termSend queues a terminal control message in order with the frames; a
// client whose queue is full is dropped.
func (c *client) termSend(env wire.Envelope) {
	if !c.term.Send(env) {
		c.log.Warn("terminal queue full; dropping client")
		c.kick(closeTooSlow, "client too slow", nil)
	}
}

// Offer implements wire.Target: it queues an output frame unless
// termBudget bytes already wait. A client that is leaving takes every
// frame (nothing to wait for).
func (c *client) Offer(frame []byte) bool {
	select {
	case <-c.stop:
		return true
	default:
	}
	return c.term.Offer(frame)
}

// Watch implements wire.Target: w is woken when the writer takes an item,
// or when the client is kicked.
func (c *client) Watch(w *wire.Waker) { c.term.Watch(w) }

// Unwatch implements wire.Target.
func (c *client) Unwatch(w *wire.Waker) { c.term.Unwatch(w) }

// writeTerm writes one queued terminal item.
func (c *client) writeTerm(out wire.Item[wire.Envelope]) error {
	c.term.Release(out)
	if out.Msg != nil {
		return writeEnvelope(c.conn, *out.Msg)
	}
	return c.w().Binary(out.Frame)
}

// termRelay is a thread's terminal state: which clients watch which
// session. (Input frames wait in the agent link's input queue.)
type termRelay struct {
	mu       sync.Mutex
	watchers map[string]map[*client]struct{} // session -> clients; made on the first attach
	// fan fans output out on the agent link's reader (one at a time: a reader
	// ends before the next link's starts reading).
	fan wire.Fanout[*client]
}

func newTermRelay() *termRelay {
	r := &termRelay{}
	r.fan.StallLimit, r.fan.LagGrace = termStallLimit, termLagGrace
	return r
}

func (r *termRelay) add(session string, c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchers == nil {
		r.watchers = map[string]map[*client]struct{}{}
	}
	if r.watchers[session] == nil {
		r.watchers[session] = map[*client]struct{}{}
	}
	r.watchers[session][c] = struct{}{}
}

func (r *termRelay) remove(session string, c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.watchers[session], c)
}

// removeAll detaches c from every session (its connection ended).
func (r *termRelay) removeAll(c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, set := range r.watchers {
		delete(set, c)
	}
}

// take returns the clients of session and forgets the session.
func (r *termRelay) take(session string) []*client {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := clientsOf(r.watchers[session])
	delete(r.watchers, session)
	return cs
}

func (r *termRelay) clients(session string) []*client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return clientsOf(r.watchers[session])
}

func clientsOf(set map[*client]struct{}) []*client {
	cs := make([]*client, 0, len(set))
	for c := range set {
		cs = append(cs, c)
	}
	return cs
}

// terminalRequest handles a client's terminal request that the bridge
// answers itself (detach) and reports whether it must go to the agent.
func (t *thread) terminalRequest(c *client, env wire.Envelope) bool {
	if env.Type != wire.TypeTerminalDetach {
		return true
	}
	var ref wire.TerminalRef
	if err := env.Decode(&ref); err != nil {
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeBadMessage, "%s", err.Error()))
		return false
	}
	t.term.remove(ref.Session, c)
	c.termSend(wire.MustNew(wire.TypeTerminalDetached, t.id, env.ID, wire.TerminalDetached{Session: ref.Session, Reason: wire.DetachRequested}))
	return false
}

// terminalFromAgent routes a terminal message from the agent and reports
// whether it did (false: route it as an ordinary reply). connID and id are
// the split request id.
func (t *thread) terminalFromAgent(env wire.Envelope, connID string) bool {
	switch env.Type {
	case wire.TypeTerminalAttached:
		var a wire.TerminalAttached
		if err := env.Decode(&a); err != nil {
			return false
		}
		t.mu.Lock()
		c := t.clients[connID]
		t.mu.Unlock()
		if c == nil {
			return true
		}
		t.term.add(a.Session, c)
		c.termSend(env)
		return true
	case wire.TypeTerminalExit, wire.TypeTerminalDetached:
		var ref wire.TerminalRef
		if err := env.Decode(&ref); err != nil {
			return false
		}
		for _, c := range t.term.take(ref.Session) {
			c.termSend(env)
		}
		return true
	}
	return false
}

// terminalOutput fans an output frame from the agent out to the session's
// clients; see the package comment on termStallLimit for the waiting rule.
// It runs on the agent link's reader (agentlink.Thread.TerminalOutput).
func (t *thread) terminalOutput(data []byte) {
	f, err := wire.ParseFrame(data)
	if err != nil || f.Kind != wire.FrameOutput {
		t.log.Warn("bad terminal frame from agent", "err", err)
		return
	}
	for _, c := range t.term.fan.Deliver(t.stop, t.term.clients(f.Session), data) {
		c.log.Warn("terminal client too slow; detached", "session", f.Session)
		t.term.remove(f.Session, c)
		c.termSend(wire.MustNew(wire.TypeTerminalDetached, t.id, "", wire.TerminalDetached{Session: f.Session, Reason: wire.DetachTooSlow}))
	}
}

// terminalInput forwards a client's input frame to the agent. It blocks at
// most agentSendWait.
func (t *thread) terminalInput(c *client, r io.Reader) {
	data, err := io.ReadAll(io.LimitReader(r, maxInputFrame+1))
	if err != nil {
		return
	}
	f, err := wire.ParseFrame(data)
	if err == nil && f.Kind != wire.FrameInput {
		err = wire.ErrBadFrame
	}
	if err != nil || len(data) > maxInputFrame {
		c.refuseBinary(t, r) // drains the rest and says what binary frames are for
		return
	}
	switch err := t.link.SendInput(data, agentSendWait); {
	case errors.Is(err, agentlink.ErrAgentGone):
		c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "sandbox stopped"))
	case errors.Is(err, agentlink.ErrAgentBusy):
		c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "agent is not accepting input"))
	} // nil: queued; ErrThreadEnded: the client is being closed
}
