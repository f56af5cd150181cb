package session

import (
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/bridge/wire"
)

// maxHistoryEvents bounds the events one thread may collect from history
// frames before the last one arrives.
const maxHistoryEvents = 1 << 20

// applyHistory takes one history frame from the bridge. Frames collect
// until one says no more follow; then the conversation is rebuilt from
// them (loop.FromEvents) and set, unless the thread already has one (an
// agent the bridge greets again after its own restart keeps its memory).
// There is no reply; a bad frame is answered bad_message, and a frame
// from a peer that is not a bridge not_allowed (a client must not write
// the model's memory).
func (t *thread) applyHistory(c *conn, env wire.Envelope) {
	if c.role != wire.RoleBridge {
		c.reply(wire.ErrorEnvelope(t.name, env.ID, wire.CodeNotAllowed, "history is sent only by a bridge"))
		return
	}
	var h wire.History
	if err := env.Decode(&h); err != nil {
		c.reply(wire.ErrorEnvelope(t.name, env.ID, wire.CodeBadMessage, "%s", err.Error()))
		return
	}
	t.mu.Lock()
	if len(t.history)+len(h.Events) > maxHistoryEvents {
		t.history = nil
		t.mu.Unlock()
		c.reply(wire.ErrorEnvelope(t.name, env.ID, wire.CodeTooLarge, "history over %d events", maxHistoryEvents))
		return
	}
	t.history = append(t.history, h.Events...)
	if h.More {
		t.mu.Unlock()
		return
	}
	events := t.history
	t.history = nil
	t.mu.Unlock()
	msgs := loop.FromEvents(events)
	applied := t.conv.ReplaceIfEmpty(msgs)
	t.log.Info("history received", "events", len(events), "messages", len(msgs), "applied", applied)
}
