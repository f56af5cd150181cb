package threadlog

import (
	"encoding/json"

	"github.com/boxwire/boxwire/bridge/wire"
)

// workState follows a thread's events to tell whether its agent is working:
// a turn runs from its user_echo to its turn_done, a tool call (also a
// run_tool) from its tool_call to its tool_result. It lives in the
// thread's Log, guarded by the Log's owner. Every event sets the
// state of its turn or call (it does not count), so an event seen twice
// changes nothing, and the agent's own account in resumed, taken at the
// end of its replay, followed by the replayed events, gives the agent's
// state at that end (resumed).
type workState struct {
	turn  bool
	calls map[string]bool
	// next is the agent's account (resumed) waiting for the events
	// published before it: it replaces the state once the event of seq
	// nextAt is committed.
	next   *workState
	nextAt uint64
}

// resumed takes the agent's account of its work from its resumed answer
// r: at once when every published event is committed (committed ==
// published), else once the event of seq published is. Later events
// (the replay, then live ones) update it as usual.
func (w *workState) resumed(r wire.Resumed, committed, published uint64) {
	s := &workState{turn: r.Turn || (r.Busy && len(r.Calls) == 0)}
	for _, id := range r.Calls {
		if s.calls == nil {
			s.calls = map[string]bool{}
		}
		s.calls[id] = true
	}
	if committed >= published {
		*w = *s
		return
	}
	w.next, w.nextAt = s, published
}

// track updates w with one committed event.
func (w *workState) track(env wire.Envelope) {
	w.trackOne(env)
	if w.next != nil && env.Seq >= w.nextAt {
		*w = *w.next
	}
}

// trackOne is track without the agent's account.
func (w *workState) trackOne(env wire.Envelope) {
	var call struct {
		CallID string `json:"call_id"`
	}
	switch env.Type {
	case wire.TypeUserEcho:
		w.turn = true
	case wire.TypeTurnDone:
		w.turn = false
	case wire.TypeToolCall:
		if json.Unmarshal(env.Data, &call) == nil && call.CallID != "" {
			if w.calls == nil {
				w.calls = map[string]bool{}
			}
			w.calls[call.CallID] = true
		}
	case wire.TypeToolResult:
		if json.Unmarshal(env.Data, &call) == nil {
			delete(w.calls, call.CallID)
		}
	case wire.TypeSandboxReplaced: // the new agent runs nothing yet
		*w = workState{next: w.next, nextAt: w.nextAt}
	}
}

func (w *workState) busy() bool { return w.turn || len(w.calls) > 0 }
