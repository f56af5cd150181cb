package server

import (
	"sync"

	"github.com/boxwire/boxwire/bridge/wire"
)

// inflight keeps the requests that start work in the agent (user_message,
// run_tool) from the moment the agent writer writes them until the
// agent answers them (the turn's user_echo, run_tool's tool_call, a busy
// error). A sandbox that dies or is recycled in between —
// the request written to a socket nobody reads any more — would lose them
// silently; replace hands them to the new agent instead. (Requests still
// queued for the writer go to the new agent anyway.) The old agent's first
// answer (answersRequest) acknowledges a request, so a request is never
// run twice in the log's view. It is safe for concurrent use.
type inflight struct {
	mu   sync.Mutex
	reqs []wire.Envelope // in the order they were handed over
}

// startsWork reports whether a request of type typ is tracked.
func startsWork(typ wire.Type) bool {
	return typ == wire.TypeUserMessage || typ == wire.TypeRunTool
}

// answersRequest reports whether env can be the agent's first answer to a
// tracked request: a reply (no seq), the turn's user_echo or run_tool's
// tool_call. Only these acknowledge, so a flood of tool_output does not
// pass through the lock.
func answersRequest(env wire.Envelope) bool {
	return env.Seq == 0 || env.Type == wire.TypeUserEcho || env.Type == wire.TypeToolCall
}

// add tracks env (its routed id, "connection/request").
func (f *inflight) add(env wire.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, env)
}

// ack stops tracking the request with the routed id, if tracked.
func (f *inflight) ack(id string) {
	if id == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, env := range f.reqs {
		if env.ID == id {
			f.reqs = append(f.reqs[:i], f.reqs[i+1:]...)
			return
		}
	}
}

// take returns the unanswered requests, oldest first, and forgets them.
func (f *inflight) take() []wire.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := f.reqs
	f.reqs = nil
	return reqs
}

// resend hands the requests the old agent never answered to the new one,
// on a goroutine owned by the thread (it ends when they are queued or the
// thread stops). It runs on replace, after the new link started.
func (t *thread) resend() {
	reqs := t.sent.take()
	if len(reqs) == 0 {
		return
	}
	t.log.Info("sending the new agent the requests the old one never answered", "requests", len(reqs))
	t.wg.Add(1) // replace runs on a readAgent, also in wg: shutdown is not waiting yet
	go func() {
		defer t.wg.Done()
		for _, env := range reqs { // the writer tracks them again
			select {
			case t.toAgent <- env:
			case <-t.stop:
				return
			}
		}
	}()
}
