package server

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Terminal relay (docs/terminal.md). The agent keeps the sessions and their
// screens; the bridge's one agent connection is attached to every session a
// client of the thread attached, and the bridge fans the output frames out
// to the clients attached to each session. Each client has a terminal queue
// of its own beside its events, bounded in bytes: while every client of a
// session is full the relay waits (which holds the agent connection, and so
// paces the program); a client that stays full while another keeps up, or
// for termStallLimit, is detached with terminal_detached too_slow and may
// attach again for a fresh screen.
const (
	// termBudget is how many bytes of output frames may wait for one client.
	termBudget = 8 << 20
	// termQueueLen bounds the queued terminal items of one client. Every
	// client has the queue, terminal or not, and a channel's buffer is
	// allocated whole: 512 items (16 KiB) hold 2 MiB of the agent's usual
	// 4 KiB frames, plenty for the relay, where 4096 cost 128 KiB each.
	termQueueLen = 512
	// termStallLimit bounds waiting for clients that are all full.
	termStallLimit = 10 * time.Second
	// termLagGrace is how long a full client may lag behind one that keeps up.
	termLagGrace = time.Second
	// termPoll is how often a waiting fan-out retries full clients.
	termPoll = time.Millisecond
	// maxInputFrame bounds a client's binary frame.
	maxInputFrame = wire.MaxFrameData + 2 + 255
)

// termOut is one queued terminal item for a client: a control message or
// an output frame.
type termOut struct {
	env   *wire.Envelope
	frame []byte
}

// termQueue is a client's terminal queue; its writePump drains it.
type termQueue struct {
	term      chan termOut
	termBytes atomic.Int64
}

func newTermQueue() termQueue { return termQueue{term: make(chan termOut, termQueueLen)} }

// termSend queues a terminal control message in order with the frames; a
// client whose queue is full is dropped.
func (c *client) termSend(env wire.Envelope) {
	select {
	case c.term <- termOut{env: &env}:
	default:
		c.log.Warn("terminal queue full; dropping client")
		c.kick(closeTooSlow, "client too slow", nil)
	}
}

// termOffer queues an output frame unless termBudget bytes already wait.
func (c *client) termOffer(frame []byte) bool {
	n := int64(len(frame))
	if c.termBytes.Load()+n > termBudget {
		return false
	}
	select {
	case <-c.stop:
		return true // leaving: nothing to wait for
	case c.term <- termOut{frame: frame}:
		c.termBytes.Add(n)
		return true
	default:
		return false
	}
}

// writeTerm writes one queued terminal item.
func (c *client) writeTerm(out termOut) error {
	if out.env != nil {
		return writeEnvelope(c.conn, *out.env)
	}
	c.termBytes.Add(-int64(len(out.frame)))
	if err := c.conn.SetWriteDeadline(time.Now().Add(writeWait)); err != nil {
		return err
	}
	return c.conn.WriteMessage(websocket.BinaryMessage, out.frame)
}

// termRelay is a thread's terminal state: which clients watch which session,
// and the input frames waiting for the agent writer.
type termRelay struct {
	mu       sync.Mutex
	watchers map[string]map[*client]struct{} // session -> clients
	input    chan []byte
}

func newTermRelay() *termRelay {
	return &termRelay{watchers: map[string]map[*client]struct{}{}, input: make(chan []byte, agentSendBuffer)}
}

func (r *termRelay) add(session string, c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
// It runs on readAgent.
func (t *thread) terminalOutput(data []byte) {
	f, err := wire.ParseFrame(data)
	if err != nil || f.Kind != wire.FrameOutput {
		t.log.Warn("bad terminal frame from agent", "err", err)
		return
	}
	pending := t.term.clients(f.Session)
	total := len(pending)
	pending = slices.DeleteFunc(pending, func(c *client) bool { return c.termOffer(data) })
	if len(pending) == 0 {
		return
	}
	deadline := time.Now().Add(termStallLimit)
	if len(pending) < total {
		deadline = time.Now().Add(termLagGrace)
	}
	timer := time.NewTimer(termPoll)
	defer timer.Stop()
	for len(pending) > 0 && time.Now().Before(deadline) {
		select {
		case <-t.stop:
			return
		case <-timer.C:
			timer.Reset(termPoll)
		}
		before := len(pending)
		pending = slices.DeleteFunc(pending, func(c *client) bool { return c.termOffer(data) })
		if len(pending) < before {
			if d := time.Now().Add(termLagGrace); d.Before(deadline) {
				deadline = d
			}
		}
	}
	for _, c := range pending {
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
	timer := time.NewTimer(agentSendWait)
	defer timer.Stop()
	select {
	case t.term.input <- data:
	case <-t.deadCh():
		c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "sandbox stopped"))
	case <-t.stop:
	case <-timer.C:
		c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "agent is not accepting input"))
	}
}

// writeAgentInput writes one input frame to the agent.
func (t *thread) writeAgentInput(data []byte) error {
	if err := t.agent.SetWriteDeadline(time.Now().Add(writeWait)); err != nil {
		return err
	}
	return t.agent.WriteMessage(websocket.BinaryMessage, data)
}
