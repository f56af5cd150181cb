package session

import (
	"encoding/json"
	"slices"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Idempotent requests (docs/resume.md, "Requests in flight"): a bridge
// that restarted or reconnected sends again the user_message and run_tool
// requests it wrote but never saw answered. The thread remembers the ids
// of the newest requests from a bridge it accepted (started a turn or a
// run_tool for) and answers a repeated one with TypeAccepted instead of
// running it twice. Only a bridge's requests are remembered: it gives
// every one a unique id, while a client may use an id again.

// maxAccepted bounds the remembered ids per thread.
const maxAccepted = 256

// acceptedIDs is a bounded set of request ids, oldest dropped first. The
// thread's mutex guards it.
type acceptedIDs struct {
	order []string
	set   map[string]bool
}

func (a *acceptedIDs) has(id string) bool { return a.set[id] }

func (a *acceptedIDs) add(id string) {
	if a.set == nil {
		a.set = map[string]bool{}
	}
	if a.set[id] {
		return
	}
	a.set[id] = true
	a.order = append(a.order, id)
	if len(a.order) > maxAccepted {
		delete(a.set, a.order[0])
		a.order = slices.Delete(a.order, 0, 1)
	}
}

// dedupes reports whether c's request id is subject to the rule: from a
// bridge and not empty.
func dedupes(c *conn, id string) bool { return c.role == wire.RoleBridge && id != "" }

// repeatedLocked answers a bridge's request that the thread accepted
// before with TypeAccepted and reports true; else it reports false. The
// caller holds t.mu.
func (t *thread) repeatedLocked(c *conn, id string) bool {
	if !dedupes(c, id) || !t.accepted.has(id) {
		return false
	}
	t.log.Info("request already accepted; not run again", "id", id)
	c.reply(wire.MustNew(wire.TypeAccepted, t.name, id, nil))
	return true
}

// acceptLocked remembers a bridge's request id once its work started. The
// caller holds t.mu.
func (t *thread) acceptLocked(c *conn, id string) {
	if dedupes(c, id) {
		t.accepted.add(id)
	}
}

// trackCallLocked follows the thread's running tool calls (the turn's and
// run_tool's) from the events it emits, as the bridge does from its log:
// a tool_call starts one, its tool_result ends it. The caller holds t.mu.
func (t *thread) trackCallLocked(env wire.Envelope) {
	if env.Type != wire.TypeToolCall && env.Type != wire.TypeToolResult {
		return
	}
	var call struct {
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(env.Data, &call) != nil || call.CallID == "" {
		return
	}
	if env.Type == wire.TypeToolResult {
		delete(t.calls, call.CallID)
		return
	}
	if t.calls == nil {
		t.calls = map[string]bool{}
	}
	t.calls[call.CallID] = true
}

// workLocked fills r's account of the thread's work as of its newest
// event. The caller holds t.mu.
func (t *thread) workLocked(r *wire.Resumed) {
	r.Seq = t.seq
	r.Turn = t.cancel != nil
	for id := range t.calls {
		r.Calls = append(r.Calls, id)
	}
	slices.Sort(r.Calls)
	r.Busy = r.Turn || len(r.Calls) > 0
}
