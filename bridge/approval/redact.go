package approval

import (
	"encoding/json"
	"sync"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Streamed tool output is masked chunk by chunk, so a secret split across
// two tool_output chunks would pass in halves. The gate keeps back the
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

// Stream masks secrets in env before it is logged or sent (stage 2 of the
// event path). A tool_output chunk may come out shortened (its tail kept
// back); keep is false when nothing of it is to be sent yet. before are
// the kept-back tails to publish first: the call's own before its
// tool_result, every call's before a turn_done. The thread calls it for
// one event at a time, in order.
func (g *Gate) Stream(env wire.Envelope) (before []wire.Envelope, out wire.Envelope, keep bool) {
	switch env.Type {
	case wire.TypeToolOutput:
		out, keep = g.holdOutput(env)
		return nil, out, keep
	case wire.TypeToolResult:
		var res wire.ToolResult
		if env.Decode(&res) == nil {
			before = g.flushHeld(func(id string) bool { return id == res.CallID })
		}
	case wire.TypeTurnDone:
		before = g.flushHeld(func(string) bool { return true })
	}
	return before, g.redact(env), true
}

// redactor is the thread's policy's redactor, with Config.Secrets.
func (g *Gate) redactor() *policy.Redactor {
	r := g.Policy().Redactor()
	if g.cfg.Secrets != nil {
		if more := g.cfg.Secrets(); len(more) > 0 {
			r = r.With(more, nil)
		}
	}
	return r
}

// redact masks secrets in tool output.
func (g *Gate) redact(env wire.Envelope) wire.Envelope {
	r := g.redactor()
	switch env.Type {
	case wire.TypeToolOutput:
		var o wire.ToolOutput
		if env.Decode(&o) == nil {
			if red := r.Redact(o.Output); red != o.Output {
				o.Output = red
				env.Data = wire.MustNew(env.Type, "", "", o).Data
			}
		}
	case wire.TypeToolResult:
		var o wire.ToolResult
		if env.Decode(&o) == nil {
			out, errText := r.Redact(o.Output), r.Redact(o.Error)
			if out != o.Output || errText != o.Error {
				o.Output, o.Error = out, errText
				env.Data = wire.MustNew(env.Type, "", "", o).Data
			}
		}
	}
	return env
}

// holdOutput masks a tool_output chunk with the call's kept-back tail in
// front, and keeps back the new tail.
func (g *Gate) holdOutput(env wire.Envelope) (wire.Envelope, bool) {
	var o wire.ToolOutput
	if env.Decode(&o) != nil {
		return g.redact(env), true
	}
	r := g.redactor()
	h := &g.held
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
func (g *Gate) flushHeld(match func(callID string) bool) []wire.Envelope {
	r := g.redactor()
	var out []wire.Envelope
	for _, tl := range g.held.take(match) {
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
// covers but the log does not hold yet; nil when none. The thread stores
// it with the cursor (agentlink.Thread).
func (g *Gate) HeldSnapshot() json.RawMessage {
	h := &g.held
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

// RestoreHeld takes back the output tails of a HeldSnapshot (from a stored
// cursor); data that does not decode is ignored. The thread calls it
// before its agent link starts.
func (g *Gate) RestoreHeld(data json.RawMessage) {
	var held []heldRecord
	if json.Unmarshal(data, &held) != nil {
		return
	}
	h := &g.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]heldTail{}
	}
	for _, r := range held {
		h.calls[r.CallID] = heldTail{text: r.Text, env: r.Env}
	}
}
