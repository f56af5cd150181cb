package server

import (
	"encoding/json"
	"fmt"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Agent resume (docs/resume.md): the agent numbers its own events and
// keeps its newest ones in a backlog; the thread remembers which agent
// process (instance) it hears and the newest agent seq it has published,
// and stores that cursor behind the events in the same store queue, so
// the stored cursor is never ahead of the stored events. Every agent link
// (new thread, reconnect, replacement, adoption after a restart) first
// sends resume with the cursor; the agent answers resumed and replays what
// followed. Agent events that arrive before resumed are dropped (the
// replay carries them), as are those at or below the cursor; a gap is
// published as events_lost, never passed over in silence.

// resumeID is the id of the resume request; it holds no "/", so its
// answer is never routed to a client.
const resumeID = "resume"

// agentCursor is a thread's position in its agent's numbering. The
// thread's mutex guards it.
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

// heldRecord is a kept-back output tail as the cursor stores it.
type heldRecord struct {
	CallID string        `json:"call_id"`
	Text   string        `json:"text"`
	Env    wire.Envelope `json:"env"`
}

// loadCursor restores the thread's stored cursor and the output tails it
// had kept back. It runs in newThread, before the agent goroutines.
func (t *thread) loadCursor() {
	c, ok, err := t.store.Cursor(t.id)
	if err != nil {
		t.log.Error("read agent cursor; events the agent replays may repeat", "err", err)
	}
	if !ok {
		return
	}
	t.cursor = agentCursor{instance: c.Instance, seen: c.Seq}
	var held []heldRecord
	if len(c.Held) > 0 && json.Unmarshal(c.Held, &held) == nil {
		h := &t.gate.held
		h.mu.Lock()
		if h.calls == nil {
			h.calls = map[string]heldTail{}
		}
		for _, r := range held {
			h.calls[r.CallID] = heldTail{text: r.Text, env: r.Env}
		}
		h.mu.Unlock()
	}
}

// linkStarted marks a new agent link: its events wait for resumed. It
// runs at the start of readAgent.
func (t *thread) linkStarted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cursor.awaiting, t.cursor.resumed = true, false
}

// resumeRequest is the first message writeAgent sends on a link.
func (t *thread) resumeRequest() wire.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	return wire.MustNew(wire.TypeResume, t.id, resumeID, wire.Resume{Instance: t.cursor.instance, After: t.cursor.seen})
}

// resumeAnswer takes the agent's answer to resume and reports whether env
// was one: resumed sets the cursor to where the replay starts (0 for a new
// instance: a restarted agent or a new sandbox); an error (an agent
// without a backlog) lets its events through unchecked.
func (t *thread) resumeAnswer(env wire.Envelope) bool {
	if env.ID != resumeID || (env.Type != wire.TypeResumed && env.Type != wire.TypeError) {
		return false
	}
	var r wire.Resumed
	if env.Type == wire.TypeError || env.Decode(&r) != nil {
		t.log.Warn("agent cannot resume; its events are relayed unchecked", "answer", string(env.Data))
		t.mu.Lock()
		t.cursor.awaiting = false
		t.mu.Unlock()
		return true
	}
	t.mu.Lock()
	renew := r.Instance != t.cursor.instance || r.After != t.cursor.seen
	done := r.Seq <= r.After // nothing to replay
	t.cursor = agentCursor{instance: r.Instance, seen: r.After, resumed: true, replaying: !done, replayEnd: r.Seq}
	t.events.work.resumed(r, t.events.committed, t.events.next) // lifecycle.go
	t.mu.Unlock()
	if renew {
		t.store.SaveCursor(t.id, store.Cursor{Instance: r.Instance, Seq: r.After, Held: t.heldSnapshot()})
	}
	t.log.Info("agent resumed", "instance", r.Instance, "after", r.After, "replayed", r.Replayed, "new_instance", renew, "busy", r.Busy)
	if done {
		t.resendStale() // inflight.go
	}
	return true
}

// agentEvent is stage 1 of the event path (events.go): it publishes one
// numbered event from the agent: a duplicate
// (at or below the cursor) is dropped, a gap is published as events_lost
// first, and the cursor moves on behind the event in the store's queue.
// After the last event of a link's replay it sends again the requests the
// agent has not answered (inflight.go).
func (t *thread) agentEvent(env wire.Envelope) {
	t.mu.Lock()
	cur := t.cursor
	replayDone := cur.replaying && env.Seq >= cur.replayEnd
	if replayDone {
		t.cursor.replaying = false
	}
	t.mu.Unlock()
	if replayDone {
		defer t.resendStale()
	}
	switch {
	case cur.awaiting && !cur.resumed:
		t.log.Debug("agent event before resumed; the replay brings it", "agent_seq", env.Seq)
		return
	case !cur.resumed:
		t.publish(env)
		return
	}
	seq := env.Seq
	if seq <= cur.seen {
		t.log.Debug("agent event already in the log; dropped", "agent_seq", seq, "cursor", cur.seen)
		return
	}
	if seq > cur.seen+1 && env.Type != wire.TypeEventsLost {
		n := seq - 1 - cur.seen
		t.log.Warn("agent events missing", "from", cur.seen+1, "to", seq-1)
		t.publish(wire.MustNew(wire.TypeEventsLost, t.id, "", wire.EventsLost{
			Instance: cur.instance, From: cur.seen + 1, To: seq - 1, Count: n,
			Message: fmt.Sprintf("%d events of the agent never reached the bridge", n),
		}))
	}
	if env.Type == wire.TypeEventsLost {
		t.log.Warn("agent reports events lost", "data", string(env.Data))
	}
	t.publish(env)
	t.mu.Lock()
	t.cursor.seen = seq
	t.mu.Unlock()
	t.store.SaveCursor(t.id, store.Cursor{Instance: cur.instance, Seq: seq, Held: t.heldSnapshot()})
}

// heldSnapshot encodes the output tails kept back (approvals_redact.go),
// which the cursor covers but the log does not hold yet; nil when none.
func (t *thread) heldSnapshot() json.RawMessage {
	h := &t.gate.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 {
		return nil
	}
	recs := make([]heldRecord, 0, len(h.calls))
	for id, tl := range h.calls {
		// flushHeld needs only the call id, thread and id of the envelope,
		// not the last chunk's output.
		env := wire.MustNew(tl.env.Type, tl.env.Thread, tl.env.ID, wire.ToolOutput{CallID: id})
		recs = append(recs, heldRecord{CallID: id, Text: tl.text, Env: env})
	}
	data, err := json.Marshal(recs)
	if err != nil {
		return nil
	}
	return data
}
