package server

import (
	"encoding/json"
	"sync"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Streamed tool output is masked chunk by chunk, so a secret split across
// two tool_output chunks would pass in halves. The thread keeps back the
// tail of each call's output that could be the start of a secret
// (policy.Redactor.HoldFrom, at most policy.MaxHold bytes) and sends it in
// front of the call's next chunk; the rest is sent when the call's
// tool_result or the turn's turn_done is published.

// heldTails is the raw output kept back per call id, with the last
// tool_output envelope of the call (for the thread and id of the flush).
type heldTails struct {
	mu    sync.Mutex
	calls map[string]heldTail
}

type heldTail struct {
	text string
	env  wire.Envelope
}

// take removes and returns the tails of the calls chosen by match.
func (h *heldTails) take(match func(callID string) bool) []heldTail {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []heldTail
	for id, tl := range h.calls {
		if match(id) {
			out = append(out, tl)
			delete(h.calls, id)
		}
	}
	return out
}

// redactStream masks secrets in env before it is logged or sent. A
// tool_output chunk may be sent shortened (its tail kept back); keep is
// false when nothing of it is to be sent yet. before are the kept-back
// tails to publish first: the call's own before its tool_result, every
// call's before a turn_done. It is called only by append.
func (t *thread) redactStream(env wire.Envelope) (before []wire.Envelope, out wire.Envelope, keep bool) {
	switch env.Type {
	case wire.TypeToolOutput:
		out, keep = t.holdOutput(env)
		return nil, out, keep
	case wire.TypeToolResult:
		var res wire.ToolResult
		if env.Decode(&res) == nil {
			before = t.flushHeld(func(id string) bool { return id == res.CallID })
		}
	case wire.TypeTurnDone:
		before = t.flushHeld(func(string) bool { return true })
	}
	return before, t.redact(env), true
}

// holdOutput masks a tool_output chunk with the call's kept-back tail in
// front, and keeps back the new tail.
func (t *thread) holdOutput(env wire.Envelope) (wire.Envelope, bool) {
	var o wire.ToolOutput
	if env.Decode(&o) != nil {
		return t.redact(env), true
	}
	r := t.policy().Redactor()
	h := &t.gate.held
	h.mu.Lock()
	s := h.calls[o.CallID].text + o.Output
	i := r.HoldFrom(s)
	if i < len(s) {
		if h.calls == nil {
			h.calls = map[string]heldTail{}
		}
		h.calls[o.CallID] = heldTail{text: s[i:], env: env}
	} else {
		delete(h.calls, o.CallID)
	}
	h.mu.Unlock()
	if i == 0 {
		return env, false
	}
	o.Output = r.Redact(s[:i])
	env.Data = wire.MustNew(env.Type, "", "", o).Data
	return env, true
}

// flushHeld returns the kept-back tails of the calls chosen by match as
// masked tool_output events.
func (t *thread) flushHeld(match func(callID string) bool) []wire.Envelope {
	r := t.policy().Redactor()
	var out []wire.Envelope
	for _, tl := range t.gate.held.take(match) {
		var o wire.ToolOutput
		if tl.env.Decode(&o) != nil {
			continue
		}
		o.Output = r.Redact(tl.text)
		env := tl.env
		env.Seq = 0
		env.Data = wire.MustNew(env.Type, "", "", o).Data
		out = append(out, env)
	}
	return out
}

// heldRecord is a kept-back output tail as the cursor stores it.
type heldRecord struct {
	CallID string        `json:"call_id"`
	Text   string        `json:"text"`
	Env    wire.Envelope `json:"env"`
}

// HeldSnapshot encodes the output tails kept back, which the agent cursor
// covers but the log does not hold yet; nil when none (agentlink.Thread:
// stored with the cursor).
func (t *thread) HeldSnapshot() json.RawMessage {
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

// RestoreHeld takes back the output tails of a stored cursor
// (agentlink.Thread); it runs before the link starts.
func (t *thread) RestoreHeld(data json.RawMessage) {
	var held []heldRecord
	if json.Unmarshal(data, &held) != nil {
		return
	}
	h := &t.gate.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]heldTail{}
	}
	for _, r := range held {
		h.calls[r.CallID] = heldTail{text: r.Text, env: r.Env}
	}
}
