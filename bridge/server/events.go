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
	return t.append(env, nil, nil)
}

// logEvent numbers env and keeps it in the log without sending it to
// anyone, and returns once it is stored: the caller hands it to shutdown
// as the clients' final message.
func (t *thread) logEvent(env wire.Envelope) wire.Envelope {
	done := make(chan wire.Envelope, 1)
	t.append(env, done, nil)
	return <-done
}

// PublishCovered is publish of an agent's event with the agent cursor
// that covers it (agentlink.Thread): the cursor, with the output the
// gate keeps back after env, is committed in the same transaction as the
// events env logs (or alone when it logs none).
func (t *thread) PublishCovered(env wire.Envelope, c store.Cursor) {
	t.append(env, nil, &c)
}

// append is publish; done, when set, receives the event once committed;
// cursor, when set, is stored with the events env logs (PublishCovered).
func (t *thread) append(env wire.Envelope, done chan<- wire.Envelope, cursor *store.Cursor) wire.Envelope {
	before, out, keep := t.gate.Stream(env) // stage 2 (bridge/approval)
	if cursor != nil {
		cursor.Held = t.gate.HeldSnapshot()
	}
	keep = keep || done != nil
	evs := before
	if keep {
		evs = append(evs, out)
	}
	if logged := t.logAppend(evs, done, cursor); keep {
		return logged
	}
	return out // a tool_output chunk kept back whole for now
}

// logAppend is stage 3: it numbers the redacted events evs and stores
// them, with cursor when set, in one store transaction, and fans them out
// (stage 4) once committed; done, when set, then receives the last one.
// It returns the last one, numbered.
func (t *thread) logAppend(evs []wire.Envelope, done chan<- wire.Envelope, cursor *store.Cursor) wire.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last wire.Envelope
	lastKept := false
	numbered := make([]wire.Envelope, 0, len(evs))
	stored := make([]wire.Envelope, 0, len(evs))
	for _, env := range evs {
		if t.link.Track(env) { // bridge/agentlink: the bridge ended this work already
			t.log.Info("dropped the old agent's answer for work the bridge ended", "type", env.Type)
			last, lastKept = env, false
			continue
		}
		env = t.events.Number(env)
		stored = append(stored, t.events.ForStore(env))
		t.events.Forget(env)
		numbered = append(numbered, env)
		last, lastKept = env, true
	}
	if !lastKept && done != nil {
		done <- last
		done = nil
	}
	if len(stored) == 0 && cursor == nil {
		return last
	}
	t.store.AppendGroup(t.id, stored, cursor, func(err error) {
		switch {
		case errors.Is(err, store.ErrDeleted): // the thread is being removed
		case errors.Is(err, store.ErrLeaseLost): // another bridge relays it now: no client gets them (failover.go)
			if done != nil {
				done <- last
			}
			return
		case err != nil:
			t.log.Error("events not stored; they are kept in memory only", "seqs", len(numbered), "last_seq", last.Seq, "err", err)
		}
		for _, env := range numbered {
			t.fanOut(env)
		}
		if done != nil {
			done <- last
		}
	})
	return last
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
