package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// suspend ends b's sandbox but keeps its threads: each thread logs ev
// (sandbox_exited, idle) and closes its clients with it, and its record is
// marked suspended; then the sandbox, its proxies and socket folder go,
// and the workspace volume stays for the resumption (resumeThread) or the
// thread retention (retire). It blocks for the engine.
func (s *Server) suspend(ctx context.Context, b *box, ev wire.SandboxExited) error {
	unlock := s.life.Lock("box:" + b.id)
	defer unlock()
	s.mu.Lock()
	ids := make([]string, 0, len(b.threads))
	for id := range b.threads {
		ids = append(ids, id)
	}
	gone := b.gone
	s.mu.Unlock()
	if gone {
		return nil
	}
	// Records first: the threads API sees each thread live or suspended,
	// never missing.
	var errs []error
	now := time.Now().UTC().Truncate(time.Second)
	for _, id := range ids {
		errs = append(errs, s.markSuspended(ctx, id, b, now, ev.Reason))
	}
	s.mu.Lock()
	if b.gone {
		s.mu.Unlock()
		return nil
	}
	b.gone = true
	if s.boxes[b.key] == b {
		delete(s.boxes, b.key)
	}
	threads := make([]*thread, 0, len(b.threads))
	for id, t := range b.threads {
		threads = append(threads, t)
		if s.threads[id] == t {
			delete(s.threads, id)
		}
	}
	s.mu.Unlock()
	s.log.Info("sandbox suspended", "box", b.id, "reason", ev.Reason, "threads", len(threads))
	for _, t := range threads {
		final := t.logEvent(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
		t.shutdown(final)
		if !slices.Contains(ids, t.id) { // joined meanwhile
			errs = append(errs, s.markSuspended(ctx, t.id, b, now, ev.Reason))
		}
	}
	// The sandbox id is read after the threads stopped: a replacement they
	// ran is over.
	res := b.res.keepingVolume()
	errs = append(errs, res.remove(ctx, s.cfg.Manager))
	s.wakePool() // pool.go: there may be room for a pooled sandbox again
	return errors.Join(errs...)
}

// markSuspended records thread id as suspended at `at` for reason; b, when
// set, fills a missing record.
func (s *Server) markSuspended(ctx context.Context, id string, b *box, at time.Time, reason wire.ExitReason) error {
	rec, ok, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("suspend thread %s: %w", id, err)
	}
	if !ok {
		if b == nil {
			return nil
		}
		rec = ThreadRecord{ID: id, Box: b.id, Scope: b.scope, Assistant: b.assistant, Image: b.image,
			Runtime: b.runtime, Created: at}
	}
	rec.Suspended, rec.SuspendedFor = &at, reason
	if err := s.cfg.Store.Put(ctx, rec); err != nil {
		return fmt.Errorf("suspend thread %s: %w", id, err)
	}
	return nil
}

// resumeThread gives the suspended thread id a new sandbox: the same box
// id and workspace volume (shared with the assistant's other threads in
// assistant scope), its conversation handed to the new agent as history,
// and sandbox_replaced (with the reason it was suspended) in its log. found
// is false when the store has no such thread. It blocks until the agent
// answers or ctx ends; a second caller for the same thread waits for the
// first and gets its thread.
func (s *Server) resumeThread(ctx context.Context, id string) (t *thread, found bool, err error) {
	unlock := s.life.Lock("thread:" + id)
	defer unlock()
	if t := s.lookup(id); t != nil {
		return t, true, nil
	}
	ctx, cancel := s.untilClose(ctx)
	defer cancel()
	rec, ok, err := s.cfg.Store.Get(ctx, id)
	if err != nil || !ok {
		return nil, ok, err
	}
	o := boxOptions{scope: rec.Scope, assistant: rec.Assistant, image: rec.Image, runtime: rec.Runtime,
		idleTTL: cmp.Or(rec.IdleTTL, s.cfg.IdleTTL), egress: rec.Egress, boxID: rec.Box}
	log := s.log.With("thread", id)
	b, err := s.acquireBox(ctx, o, id)
	if err != nil {
		return nil, true, err
	}
	defer s.joined(b) // box.go: the reaper left b alone while the thread started
	t, n, err := s.resumeIn(ctx, b, rec)
	if err != nil {
		if b.scope == wire.ScopeThread {
			s.dropBoxKeepVolume(ctx, b, log)
		}
		return nil, true, err
	}
	why := cmp.Or(rec.SuspendedFor, wire.ExitIdle)
	t.log.Info("suspended thread resumed", "box", b.id, "sandbox", b.res.sandbox(), "history_events", n)
	t.publish(wire.MustNew(wire.TypeSandboxReplaced, id, "", wire.SandboxReplaced{
		Reason: why, SandboxID: b.res.sandbox(), Restored: n,
		Message: fmt.Sprintf("suspended thread resumed in a new sandbox (it was suspended: %s); workspace and conversation kept", why),
	}))
	return t, true, nil
}

// resumeIn greets b's agent for rec's thread, hands it the history and
// registers the thread, no longer suspended.
func (s *Server) resumeIn(ctx context.Context, b *box, rec ThreadRecord) (*thread, int, error) {
	conn, err := s.waitAgent(ctx, rec.ID, b.res)
	if err != nil {
		return nil, 0, err
	}
	log := s.log.With("thread", rec.ID)
	n, err := sendHistory(conn, s.events, rec.ID, log)
	if err != nil {
		conn.Close()
		return nil, 0, err
	}
	last, err := s.events.LastSeq(rec.ID)
	if err != nil {
		conn.Close()
		return nil, 0, fmt.Errorf("read thread log: %w", err)
	}
	t := newThread(s, rec.ID, conn, b.res, last, log)
	t.gate.set(s.storedPolicy(rec)) // approvals_egress.go
	if !rec.Created.IsZero() {
		t.created = rec.Created
	}
	s.setLinked(b, rec.ID, b.res.sandbox())
	rec.Suspended, rec.SuspendedFor, rec.Box = nil, "", b.id
	if err := s.register(ctx, t, b, rec); err != nil {
		t.shutdown(wire.Envelope{})
		return nil, 0, err
	}
	return t, n, nil
}

// dropBoxKeepVolume removes b from the server and its resources but the
// workspace volume, which a suspended thread still owns.
func (s *Server) dropBoxKeepVolume(ctx context.Context, b *box, log *slog.Logger) {
	s.forgetBox(b)
	s.removeResources(ctx, b.res.keepingVolume(), log)
}

// suspendedRecord returns id's record when the thread is suspended (no
// live thread, marked in the store).
func (s *Server) suspendedRecord(ctx context.Context, id string) (ThreadRecord, bool) {
	if s.lookup(id) != nil {
		return ThreadRecord{}, false
	}
	rec, ok, err := s.cfg.Store.Get(ctx, id)
	if err != nil || !ok || rec.Suspended == nil {
		return ThreadRecord{}, false
	}
	return rec, true
}

// suspendedInfo describes a suspended thread in the threads API: Expires
// is when the thread retention removes it.
func (s *Server) suspendedInfo(rec ThreadRecord) wire.ThreadInfo {
	at := *rec.Suspended
	return wire.ThreadInfo{
		ID: rec.ID, Scope: rec.Scope, Assistant: rec.Assistant, Image: rec.Image, Runtime: rec.Runtime,
		Status: wire.SandboxSuspended, Created: rec.Created, Expires: at.Add(s.cfg.ThreadTTL), Suspended: &at,
		Egress: rec.Egress,
	}
}

// suspendedBox is the box id of the newest suspended thread of assistant,
// so that its next sandbox takes the assistant's workspace back; "" when
// there is none.
func (s *Server) suspendedBox(ctx context.Context, assistant string) string {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return ""
	}
	var id string
	var newest time.Time
	for _, r := range recs {
		if r.Scope == wire.ScopeAssistant && r.Assistant == assistant && r.Suspended != nil && !r.Suspended.Before(newest) {
			id, newest = r.Box, *r.Suspended
		}
	}
	return id
}

// retire removes the threads suspended for ThreadTTL or longer, with
// their logs and workspace volumes.
func (s *Server) retire(ctx context.Context, now time.Time) {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.log.Error("thread retention", "err", err)
		return
	}
	for _, r := range recs {
		if r.Suspended == nil || now.Sub(*r.Suspended) < s.cfg.ThreadTTL {
			continue
		}
		if err := s.removeSuspended(ctx, r.ID); err != nil {
			s.log.Error("remove suspended thread", "thread", r.ID, "err", err)
			continue
		}
		s.log.Info("suspended thread removed", "thread", r.ID, "suspended", r.Suspended, "thread_ttl", s.cfg.ThreadTTL)
	}
}

// removeSuspended deletes a suspended thread's record and log, and its
// workspace volume when no other thread or sandbox uses it. A thread
// resumed meanwhile is left alone.
func (s *Server) removeSuspended(ctx context.Context, id string) error {
	unlock := s.life.Lock("thread:" + id)
	defer unlock()
	rec, ok := s.suspendedRecord(ctx, id)
	if !ok {
		return nil
	}
	if err := s.cfg.Store.Delete(ctx, id); err != nil {
		return err
	}
	return s.dropVolumeIfUnused(ctx, rec.Box)
}

// dropVolumeIfUnused removes box id's workspace volume unless a live
// sandbox or a stored thread still uses it.
func (s *Server) dropVolumeIfUnused(ctx context.Context, id string) error {
	unlock := s.life.Lock("box:" + id)
	defer unlock()
	s.mu.Lock()
	for _, b := range s.boxes {
		select {
		case <-b.ready: // b.id is set
		default:
			continue
		}
		if b.id == id {
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Box == id {
			return nil
		}
	}
	return s.cfg.Manager.RemoveVolume(ctx, "boxwire-ws-"+id)
}

// suspendedInfos describes every suspended thread.
func (s *Server) suspendedInfos(ctx context.Context) []wire.ThreadInfo {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.log.Error("list stored threads", "err", err)
	}
	var out []wire.ThreadInfo
	for _, r := range recs {
		if r.Suspended != nil && s.lookup(r.ID) == nil {
			out = append(out, s.suspendedInfo(r))
		}
	}
	return out
}
