package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// workState follows a thread's events to tell whether its agent is working:
// a turn runs from its user_echo to its turn_done, a tool call (also a
// run_tool) from its tool_call to its tool_result. It lives in the
// thread's eventLog, guarded by the thread's mutex. Every event sets the
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

// working reports whether t's agent runs a turn or a tool call.
func (t *thread) working() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.work.busy()
}

// boxBusy reports whether any thread of b is working. The caller holds
// s.mu.
func (s *Server) boxBusy(b *box) bool {
	for _, t := range b.threads {
		if t.working() {
			return true
		}
	}
	return false
}

// setLinked records that thread id's agent link talks to sandbox sb.
func (s *Server) setLinked(b *box, id, sb string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.linked == nil {
		b.linked = map[string]string{}
	}
	b.linked[id] = sb
}

// replacedLoss handles the end of l's agent connection when the bridge
// removed the sandbox on purpose (b.planned: maximum lifetime, image
// update), when another thread already replaced the shared sandbox, or
// when a shared (assistant) sandbox stopped: it publishes sandbox_exited
// and replaces the sandbox (replace). It returns false, doing nothing, when
// agentLost's own handling applies (a thread-scope sandbox that died, or a
// connection lost while the sandbox runs). It runs on l's readAgent.
func (t *thread) replacedLoss(l *agentLink) bool {
	s := t.srv
	s.mu.Lock()
	b := t.box
	if b == nil {
		s.mu.Unlock()
		return false
	}
	old, cur := b.linked[t.id], b.res.sandbox()
	planned, last := b.planned, b.lastReplace
	s.mu.Unlock()
	var ev wire.SandboxExited
	switch {
	case planned != nil && (old == "" || old == cur):
		ev = *planned
	case old != "" && old != cur:
		ev = last
	case b.scope == wire.ScopeAssistant:
		var stopped bool
		if ev, stopped = t.sharedExit(b, old); !stopped {
			return false
		}
	default:
		return false
	}
	t.publish(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
	t.log.Warn("agent connection ended: sandbox replaced", "reason", ev.Reason)
	t.endLostWork(ev.Message) // turnend.go: the replacement runs none of it
	<-l.writerDone
	if err := t.replace(ev); err != nil {
		t.log.Error("replace sandbox", "err", err)
		t.publish(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "%s; no replacement: %v", ev.Message, err))
	}
	return true
}

// sharedExit polls the engine briefly about old, the shared sandbox t's
// agent ran in: it reports why it stopped, or why another thread of b
// already replaced it; stopped is false when it seems to run on.
func (t *thread) sharedExit(b *box, old string) (ev wire.SandboxExited, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	for {
		t.srv.mu.Lock()
		cur, last := b.res.sandbox(), b.lastReplace
		t.srv.mu.Unlock()
		if old != "" && cur != old {
			return last, true
		}
		sb, err := t.mgr.Inspect(ctx, cur)
		switch {
		case err == nil && !sb.Running:
			return exitEvent(sb), true
		case errors.Is(err, sandbox.ErrNotFound):
			b.recreateMu.Lock() // another thread's recreate, if one removed it, is over
			b.recreateMu.Unlock()
			t.srv.mu.Lock()
			cur, last = b.res.sandbox(), b.lastReplace
			t.srv.mu.Unlock()
			if old != "" && cur != old {
				return last, true
			}
			return wire.SandboxExited{Reason: wire.ExitDied, Message: "sandbox stopped: it was removed"}, true
		}
		select {
		case <-ctx.Done():
			return wire.SandboxExited{}, false
		case <-t.stop:
			return wire.SandboxExited{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recycle removes b's sandbox on purpose (why: maximum lifetime, image
// update) so that each of its threads replaces it (replacedLoss); a box
// without threads gets its new sandbox at once. It blocks for the engine's
// removal.
func (s *Server) recycle(ctx context.Context, b *box, why wire.SandboxExited) {
	s.mu.Lock()
	if b.gone || b.planned != nil {
		s.mu.Unlock()
		return
	}
	n := len(b.threads)
	if n > 0 {
		b.planned, b.plannedAt = &why, time.Now()
	}
	b.dueSince = time.Time{}
	old := b.res.sandbox()
	s.mu.Unlock()
	s.log.Info("recycling sandbox", "box", b.id, "reason", why.Reason, "threads", n, "why", why.Message)
	if n == 0 {
		if _, err := s.recreate(ctx, b, old, why); err != nil {
			s.log.Error("recycle sandbox", "box", b.id, "err", err)
		}
		return
	}
	// A kill, not a removal: the thread's replacement removes it, and the
	// engine refuses two removals of one container at once.
	if err := s.cfg.Manager.Stop(ctx, old, 0); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.log.Error("stop sandbox to recycle it", "box", b.id, "err", err)
	}
}

// recreate makes b run a sandbox newer than old, on the same workspace
// volume, socket folder and proxies: the first caller for old removes it
// and creates the next one; later callers (the other threads of a shared
// sandbox) find it done. It returns the current sandbox id. A recycle for
// the maximum lifetime starts a new lifetime. It blocks for the engine.
func (s *Server) recreate(ctx context.Context, b *box, old string, why wire.SandboxExited) (string, error) {
	b.recreateMu.Lock()
	defer b.recreateMu.Unlock()
	if cur := b.res.sandbox(); old != "" && cur != old {
		return cur, nil
	}
	if err := s.removeRetrying(ctx, b.res.sandbox()); err != nil {
		return "", fmt.Errorf("remove the old sandbox: %w", err)
	}
	s.mu.Lock()
	now := time.Now().UTC().Truncate(time.Second)
	if why.Reason == wire.ExitLifetime || !now.Before(b.expires) {
		b.created, b.expires = now, now.Add(s.cfg.MaxLifetime)
	}
	b.planned, b.lastReplace, b.dueSince = nil, why, time.Time{}
	s.mu.Unlock()
	sb, err := s.cfg.Manager.Create(ctx, s.spec(b))
	if err != nil {
		return "", fmt.Errorf("create sandbox: %w", err)
	}
	b.res.setSandbox(sb.ID)
	s.recordImage(ctx, b)
	s.log.Info("sandbox recreated", "box", b.id, "sandbox", sb.ID, "reason", why.Reason)
	return sb.ID, nil
}

// removeRetrying removes sandbox id, trying again for a few seconds while
// the engine refuses (a removal already in progress, a container still
// stopping).
func (s *Server) removeRetrying(ctx context.Context, id string) error {
	var err error
	for range 10 {
		if err = s.cfg.Manager.Remove(ctx, id); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
	return err
}

// recordImage notes the image id b's sandbox runs, when the manager can
// tell (sandbox.ImageResolver).
func (s *Server) recordImage(ctx context.Context, b *box) {
	res, ok := s.cfg.Manager.(sandbox.ImageResolver)
	if !ok {
		return
	}
	id, err := res.SandboxImageID(ctx, b.res.sandbox())
	if err != nil {
		s.log.Warn("image id of sandbox", "box", b.id, "err", err)
		return
	}
	s.mu.Lock()
	b.imageID = id
	s.mu.Unlock()
}
