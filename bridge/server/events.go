package server

import (
	"errors"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/threadlog"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The event path. Every event of a thread passes these stages, in this
// order, each in one place:
//
//  1. resume and dedupe — agentEvent (bridge/agentlink), for the agent's events
//     only: events before the agent's resumed and events at or below the
//     thread's agent cursor are dropped (the replay brings them, or the log
//     has them); a gap is published as events_lost first. The bridge's own
//     events (sandbox_exited, sandbox_replaced, egress, usage, approvals)
//     start at stage 2.
//  2. redaction — approval.Gate.Stream (bridge/approval): secrets never reach
//     a client or the log; a tool_output tail that may hold the start of
//     one is kept back until the next chunk or the result.
//  3. log append — logAppend: the old agent's late answers for work the
//     bridge ended are dropped (agentlink's Link.Track); the event is
//     numbered with the thread's next seq and queued to the store.
//  4. fan-out — fanOut, once the store committed it: the event enters the
//     thread's tail and every attached client's writer is woken; each
//     writer reads it from the tail by cursor (client.go write).
//
// The thread's numbering and tail are a threadlog.Log.
//
// publish and logEvent are the entries; the agent link's fromAgent
// (bridge/agentlink) routes the agent's messages to stage 1.

// replayBatch is how many events a client's writer takes at a time.
const replayBatch = 256

// DefaultMaxStoredOutput caps the tool_output bytes of one call kept in the
// store (Config.MaxStoredOutput).
const DefaultMaxStoredOutput = threadlog.DefaultMaxStoredOutput

// publish runs env through stages 2-4: it redacts, numbers and stores env;
// once the store has committed it, it is fanned out. It does not block
// (unless the store's queue is full). It returns the numbered event.
func (t *thread) publish(env wire.Envelope) wire.Envelope {
	return t.append(env, nil)
}

// logEvent numbers env and keeps it in the log without sending it to
// anyone, and returns once it is stored: the caller hands it to shutdown
// as the clients' final message.
func (t *thread) logEvent(env wire.Envelope) wire.Envelope {
	done := make(chan wire.Envelope, 1)
	t.append(env, done)
	return <-done
}

// append is publish; done, when set, receives the event once committed.
func (t *thread) append(env wire.Envelope, done chan<- wire.Envelope) wire.Envelope {
	before, env, keep := t.gate.Stream(env) // stage 2 (bridge/approval)
	for _, b := range before {
		t.logAppend(b, nil)
	}
	if !keep && done == nil {
		return env // a tool_output chunk kept back whole for now
	}
	return t.logAppend(env, done)
}

// logAppend is stage 3: it numbers and stores one redacted event, and
// fans it out (stage 4) once committed.
func (t *thread) logAppend(env wire.Envelope, done chan<- wire.Envelope) wire.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.link.Track(env) { // bridge/agentlink: the bridge ended this work already
		t.log.Info("dropped the old agent's answer for work the bridge ended", "type", env.Type)
		if done != nil {
			done <- env
		}
		return env
	}
	env = t.events.Number(env)
	stored := t.events.ForStore(env)
	t.events.Forget(env)
	t.store.Append(t.id, stored, func(err error) {
		switch {
		case errors.Is(err, store.ErrDeleted): // the thread is being removed
		case errors.Is(err, store.ErrLeaseLost): // another bridge relays it now: no client gets it (failover.go)
			if done != nil {
				done <- env
			}
			return
		case err != nil:
			t.log.Error("event not stored; it is kept in memory only", "seq", env.Seq, "err", err)
		}
		t.fanOut(env)
		if done != nil {
			done <- env
		}
	})
	return env
}

// fanOut is stage 4: a committed event enters the tail, and every
// attached client's writer is woken to send it.
func (t *thread) fanOut(env wire.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events.Add(env)
	for _, c := range t.clients {
		c.wakeUp()
	}
}

// eventsAfter returns up to replayBatch committed events with seq > after:
// from the tail, else from the store. When the store no longer has them
// (retention), it returns the oldest the thread still has.
func (t *thread) eventsAfter(after uint64) []wire.Envelope {
	t.mu.Lock()
	committed := t.events.Committed()
	evs, ok := t.events.FromTail(after, replayBatch)
	t.mu.Unlock()
	if ok || after >= committed {
		return evs
	}
	evs, err := t.store.Events(t.id, after, replayBatch)
	if err != nil {
		t.log.Error("replay from the store", "after", after, "err", err)
	}
	for len(evs) > 0 && evs[len(evs)-1].Seq > committed {
		evs = evs[:len(evs)-1]
	}
	if len(evs) == 0 {
		t.mu.Lock()
		evs = t.events.Head(replayBatch)
		t.mu.Unlock()
	}
	return evs
}

// committedSeq is the newest event a client may be sent.
func (t *thread) committedSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.Committed()
}
