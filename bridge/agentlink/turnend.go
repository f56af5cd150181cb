package agentlink

import (
	"encoding/json"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Every turn ends (docs/lifecycle.md, "A turn always ends"). The thread
// follows, from the events it publishes, which turn and tool calls its log
// shows running (openWork). When the agent that ran them goes away and
// nothing can continue them — the sandbox stopped, or the agent behind a
// new link is another process that does not run them — the bridge
// publishes the missing tool_result of each call (status sandbox_lost) and
// the turn's turn_done (reason sandbox_lost), once. An answer the old agent
// sends afterwards for a call or a turn the bridge ended is dropped, so a
// client never sees two.

// openCall is a tool call the log shows running: the id its events carry
// (the turn's, or the run_tool's) and the tool's name.
type openCall struct {
	id, name string
}

// openWork is what the thread's log shows running, as of the newest
// published event. The link's mutex guards it. Events are tracked when
// the thread numbers them (Track), so the view follows publication
// order, not the store's commits.
type openWork struct {
	// loaded is false for a thread made from a stored log (adoption,
	// resume) until the log was read once (loadOpenWork).
	loaded bool
	inTurn bool
	turnID string // the open turn's id (its user_echo's)
	calls  map[string]openCall
	order  []string // open call ids, oldest first
	// endedTurn is set when the bridge ended the turn, until the next
	// user_echo; endedCalls holds calls the bridge ended. The old agent's
	// late answers for them are dropped.
	endedTurn  bool
	endedCalls map[string]bool
	// account is the agent's own account of its work from the current
	// link's resumed, waiting for the replay's last event (agent seq
	// accountAt) to be published; nil when none waits.
	account   *wire.Resumed
	accountAt uint64
}

// maxEndedCalls bounds endedCalls; the oldest are forgotten first.
const maxEndedCalls = 256

// callIDOf is the call_id of a tool_call, tool_output or tool_result.
func callIDOf(env wire.Envelope) (id, name string) {
	var c struct {
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	}
	if json.Unmarshal(env.Data, &c) != nil {
		return "", ""
	}
	return c.CallID, c.Name
}

// track updates w with one event about to be numbered and reports whether
// it must be dropped instead: the old agent's late tool_output,
// tool_result or turn_done for work the bridge already ended.
func (w *openWork) track(env wire.Envelope) (drop bool) {
	switch env.Type {
	case wire.TypeUserEcho:
		w.inTurn, w.turnID, w.endedTurn = true, env.ID, false
	case wire.TypeTurnDone:
		if !w.inTurn && w.endedTurn {
			return true
		}
		w.inTurn = false
	case wire.TypeToolCall:
		id, name := callIDOf(env)
		if id == "" {
			return false
		}
		if w.calls == nil {
			w.calls = map[string]openCall{}
		}
		if _, ok := w.calls[id]; !ok {
			w.order = append(w.order, id)
		}
		w.calls[id] = openCall{id: env.ID, name: name}
	case wire.TypeToolOutput:
		id, _ := callIDOf(env)
		_, open := w.calls[id]
		return !open && w.endedCalls[id]
	case wire.TypeToolResult:
		id, _ := callIDOf(env)
		if _, open := w.calls[id]; !open {
			if w.endedCalls[id] {
				delete(w.endedCalls, id)
				return true
			}
			return false
		}
		delete(w.calls, id)
		for i, o := range w.order {
			if o == id {
				w.order = append(w.order[:i], w.order[i+1:]...)
				break
			}
		}
	}
	return false
}

// orphans returns the open calls, oldest first, and whether the turn is
// open, leaving out what running says the agent runs; it marks what it
// returns as ended by the bridge.
func (w *openWork) orphans(running func(callID string) bool, turnRuns bool) (calls []wire.Envelope, turn *wire.Envelope) {
	for _, id := range w.order {
		if running != nil && running(id) {
			continue
		}
		c := w.calls[id]
		calls = append(calls, wire.MustNew(wire.TypeToolResult, "", c.id, wire.ToolResult{CallID: id, Name: c.name}))
		if w.endedCalls == nil {
			w.endedCalls = map[string]bool{}
		}
		if len(w.endedCalls) >= maxEndedCalls {
			for k := range w.endedCalls {
				delete(w.endedCalls, k)
				break
			}
		}
		w.endedCalls[id] = true
	}
	if w.inTurn && !turnRuns {
		env := wire.MustNew(wire.TypeTurnDone, "", w.turnID, wire.TurnDone{Reason: wire.ReasonSandboxLost})
		turn = &env
		w.endedTurn = true
	}
	return calls, turn
}

// endLostWork ends every turn and call the log shows running: their agent
// is gone and nothing continues them (the sandbox stopped; a replacement
// starts with none of them). why is shown as each call's error. It runs on
// a reader (the lost connection's, before the replacement).
func (l *Link) endLostWork(why string) {
	l.endWork(why, nil, false)
}

// endWork publishes a tool_result for each open call that running does not
// name, then a turn_done for the open turn unless turnRuns.
func (l *Link) endWork(why string, running func(string) bool, turnRuns bool) {
	l.loadOpenWork()
	l.mu.Lock()
	calls, turn := l.open.orphans(running, turnRuns)
	l.mu.Unlock()
	if len(calls) == 0 && turn == nil {
		return
	}
	l.log.Warn("ending work its agent no longer runs", "calls", len(calls), "turn", turn != nil, "why", why)
	for _, env := range calls {
		var r wire.ToolResult
		_ = env.Decode(&r) // made above
		r.Status, r.Error = wire.StatusSandboxLost, why
		l.cfg.Thread.Publish(wire.MustNew(wire.TypeToolResult, l.id, env.ID, r))
	}
	if turn != nil {
		env := *turn
		env.Thread = l.id
		l.cfg.Thread.Publish(env)
	}
}

// loadOpenWork reads, once, what a log made before this thread existed
// shows running (a thread adopted after a restart or resumed from
// suspension): it scans the stored events. It runs on a reader, which
// is where the work-tracking events are published.
func (l *Link) loadOpenWork() {
	l.mu.Lock()
	loaded := l.open.loaded
	l.mu.Unlock()
	if loaded {
		return
	}
	l.cfg.Store.Flush()
	var scan openWork
	for after := uint64(0); ; {
		evs, err := l.cfg.Store.Events(l.id, after, 4096)
		if err != nil {
			l.log.Error("read the log for running work; it is not ended", "err", err)
			break
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
		for _, e := range evs {
			scan.track(e)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open.loaded {
		return
	}
	scan.loaded, scan.endedTurn, scan.endedCalls = true, l.open.endedTurn, l.open.endedCalls
	scan.account, scan.accountAt = l.open.account, l.open.accountAt
	l.open = scan
}

// noteResumed keeps the agent's account of its work from a resumed
// answer, to compare with the log once the replay is published; with
// nothing to replay it compares at once. It runs on the reader, after
// resumeAnswer took env.
func (l *Link) noteResumed(env wire.Envelope) {
	var r wire.Resumed
	if env.Type != wire.TypeResumed || env.Decode(&r) != nil {
		return
	}
	done := r.Seq <= r.After // nothing to replay
	l.mu.Lock()
	l.open.account, l.open.accountAt = &r, r.Seq
	if done {
		l.open.accountAt = 0
	}
	l.mu.Unlock()
	if done {
		l.replayPublished(0)
	}
}

// replayPublished runs after each agent event (agent seq seq) is handled:
// once the current link's replay is published, the log and the agent's
// account agree on what runs, and what the log shows running but the
// agent does not (another agent process answered: it restarted, or the
// sandbox is new) is ended.
func (l *Link) replayPublished(seq uint64) {
	l.mu.Lock()
	r := l.open.account
	if r == nil || seq < l.open.accountAt {
		l.mu.Unlock()
		return
	}
	l.open.account = nil
	l.mu.Unlock()
	running := map[string]bool{}
	for _, id := range r.Calls {
		running[id] = true
	}
	turnRuns := r.Turn || (r.Busy && len(r.Calls) == 0)
	l.endWork("no result: the agent that ran this call restarted and no longer runs it",
		func(id string) bool { return running[id] }, turnRuns)
}

// Track updates the link's view of the running work with one event the
// thread is about to number, and reports whether the thread must drop it
// instead: the old agent's late tool_output, tool_result or turn_done for
// work the bridge already ended. The thread calls it under its own lock,
// in the order it numbers events.
func (l *Link) Track(env wire.Envelope) (drop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open.track(env)
}
