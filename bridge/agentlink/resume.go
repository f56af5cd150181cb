package agentlink

import (
	"fmt"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Agent resume (docs/resume.md): the agent numbers its own events and
// keeps its newest ones in a backlog; the thread remembers which agent
// process (instance) it hears and the newest agent seq it has published,
// and stores that cursor in the same store transaction as the events it
// covers, so the stored cursor is neither ahead of the stored events nor
// behind them (a replay would log again what it is behind). Every agent link
// (new thread, reconnect, replacement, adoption after a restart) first
// sends resume with the cursor; the agent answers resumed and replays what
// followed. Agent events that arrive before resumed are dropped (the
// replay carries them), as are those at or below the cursor; a gap is
// published as events_lost, never passed over in silence.

// resumeID is the id of the resume request; it holds no "/", so its
// answer is never routed to a client.
const resumeID = "resume"

// agentCursor is a thread's position in its agent's numbering. The
// link's mutex guards it.
type agentCursor struct {
	instance string
	seen     uint64 // newest agent seq published
	// awaiting is set from the link's start until the agent answers
	// resume; resumed when it answered resumed (an agent without a
	// backlog answers an error: its events are relayed unchecked).
	awaiting, resumed bool
	// replaying is set from resumed until the replay's last event
	// (agent seq replayEnd) is processed; then the requests the agent
	// has not answered are sent again (inflight.go).
	replaying bool
	replayEnd uint64
}

// loadCursor restores the thread's stored cursor and gives the thread
// back the output tails it had kept back. It runs in New.
func (l *Link) loadCursor() {
	c, ok, err := l.cfg.Store.Cursor(l.id)
	if err != nil {
		l.log.Error("read agent cursor; events the agent replays may repeat", "err", err)
	}
	if !ok {
		return
	}
	l.cursor = agentCursor{instance: c.Instance, seen: c.Seq}
	if len(c.Held) > 0 {
		l.cfg.Thread.RestoreHeld(c.Held)
	}
}

// started marks a new agent connection: its events wait for resumed. It
// runs at the start of read.
func (l *Link) started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cursor.awaiting, l.cursor.resumed = true, false
}

// resumeRequest is the first message write sends on a connection.
func (l *Link) resumeRequest() wire.Envelope {
	l.mu.Lock()
	defer l.mu.Unlock()
	return wire.MustNew(wire.TypeResume, l.id, resumeID, wire.Resume{Instance: l.cursor.instance, After: l.cursor.seen})
}

// resumeAnswer takes the agent's answer to resume and reports whether env
// was one: resumed sets the cursor to where the replay starts (0 for a new
// instance: a restarted agent or a new sandbox); an error (an agent
// without a backlog) lets its events through unchecked.
func (l *Link) resumeAnswer(env wire.Envelope) bool {
	if env.ID != resumeID || (env.Type != wire.TypeResumed && env.Type != wire.TypeError) {
		return false
	}
	var r wire.Resumed
	if env.Type == wire.TypeError || env.Decode(&r) != nil {
		l.log.Warn("agent cannot resume; its events are relayed unchecked", "answer", string(env.Data))
		l.mu.Lock()
		l.cursor.awaiting = false
		l.mu.Unlock()
		return true
	}
	l.mu.Lock()
	renew := r.Instance != l.cursor.instance || r.After != l.cursor.seen
	done := r.Seq <= r.After // nothing to replay
	l.cursor = agentCursor{instance: r.Instance, seen: r.After, resumed: true, replaying: !done, replayEnd: r.Seq}
	l.mu.Unlock()
	l.cfg.Thread.AgentResumed(r) // the thread's work state
	if renew {
		l.cfg.Store.SaveCursor(l.id, store.Cursor{Instance: r.Instance, Seq: r.After, Held: l.cfg.Thread.HeldSnapshot()})
	}
	l.log.Info("agent resumed", "instance", r.Instance, "after", r.After, "replayed", r.Replayed, "new_instance", renew, "busy", r.Busy)
	if done {
		l.resendStale() // inflight.go
	}
	return true
}

// agentEvent is stage 1 of the thread's event path (resume and dedupe):
// it publishes one numbered event from the agent: a duplicate
// (at or below the cursor) is dropped, a gap is published as events_lost
// first, and the cursor moves on with the event, in the same store
// transaction (PublishCovered).
// After the last event of a link's replay it sends again the requests the
// agent has not answered (inflight.go).
func (l *Link) agentEvent(env wire.Envelope) {
	l.mu.Lock()
	cur := l.cursor
	replayDone := cur.replaying && env.Seq >= cur.replayEnd
	if replayDone {
		l.cursor.replaying = false
	}
	l.mu.Unlock()
	if replayDone {
		defer l.resendStale()
	}
	switch {
	case cur.awaiting && !cur.resumed:
		l.log.Debug("agent event before resumed; the replay brings it", "agent_seq", env.Seq)
		return
	case !cur.resumed:
		l.cfg.Thread.Publish(env)
		return
	}
	seq := env.Seq
	if seq <= cur.seen {
		l.log.Debug("agent event already in the log; dropped", "agent_seq", seq, "cursor", cur.seen)
		return
	}
	if seq > cur.seen+1 && env.Type != wire.TypeEventsLost {
		n := seq - 1 - cur.seen
		l.log.Warn("agent events missing", "from", cur.seen+1, "to", seq-1)
		l.cfg.Thread.Publish(wire.MustNew(wire.TypeEventsLost, l.id, "", wire.EventsLost{
			Instance: cur.instance, From: cur.seen + 1, To: seq - 1, Count: n,
			Message: fmt.Sprintf("%d events of the agent never reached the bridge", n),
		}))
	}
	if env.Type == wire.TypeEventsLost {
		l.log.Warn("agent reports events lost", "data", string(env.Data))
	}
	l.cfg.Thread.PublishCovered(env, store.Cursor{Instance: cur.instance, Seq: seq})
	l.mu.Lock()
	l.cursor.seen = seq
	l.mu.Unlock()
}
