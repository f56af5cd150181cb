package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/agentlink"
	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Suspended threads (docs/lifecycle.md): the fleet suspends an idle
// sandbox (bridge/fleet, Member.Suspend: thread.Suspend ends each thread)
// and keeps its workspace volume; the thread's record is marked
// suspended. The next client to name the thread resumes it here.

// resumeThread gives the suspended thread id a new sandbox: the same box
// id and workspace volume (shared with the assistant's other threads in
// assistant scope), its conversation handed to the new agent as history,
// and sandbox_replaced (with the reason it was suspended) in its log. found
// is false when the store has no such thread. It blocks until the agent
// answers or ctx ends — on a shared store, right after an outage, first
// until this bridge's renewals settle (failover.Failover.AwaitSettled); a second caller for
// the same thread waits for the first and gets its thread.
func (s *Server) resumeThread(ctx context.Context, id string) (t *thread, found bool, err error) {
	unlock := s.fleet.Locks().Thread(id)
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
	if err := s.fo.AwaitSettled(ctx, rec); err != nil { // not right after a store outage (bridge/failover)
		return nil, true, err
	}
	// Its lease is renewed while it starts (leases.go).
	defer s.leases.Begin(id)()
	if rec.Scope == wire.ScopeAssistant { // in its box's running sandbox, whichever bridge runs it (bridge/failover)
		if done, err := s.fo.TakeOverShared(ctx, rec); done {
			return s.tookOver(id, err)
		}
	}
	if err := s.leases.Acquire(ctx, id); err != nil { // another bridge relays it: no second sandbox (leases.go)
		return nil, true, err
	}
	defer func() {
		if err != nil { // the start failed: another bridge may try (leases.go)
			s.leases.Drop(context.WithoutCancel(ctx), id)
		}
	}()
	if done, err := s.fo.TakeOverIn(ctx, rec); done { // its bridge is gone, its sandbox runs (bridge/failover)
		return s.tookOver(id, err)
	}
	b, conn, err := s.fleet.Acquire(ctx, s.fleet.ResumeOptions(rec), id)
	if err != nil {
		return nil, true, err
	}
	defer s.fleet.Started(b) // the reaper left b alone while the thread started
	t, n, err := s.resumeIn(ctx, b, conn, rec)
	if err != nil {
		s.fleet.Abandon(ctx, b) // the workspace volume stays
		return nil, true, err
	}
	resumed(t, b, rec, n)
	return t, true, nil
}

// tookOver is resumeThread's answer once fail-over took thread id over
// with err: the thread registered here.
func (s *Server) tookOver(id string, err error) (*thread, bool, error) {
	if err != nil {
		return nil, true, err
	}
	if t := s.lookup(id); t != nil {
		return t, true, nil
	}
	return nil, true, errors.New("took the thread over, but it is no longer relayed here")
}

// resumed logs and publishes that t, rec's suspended thread, was resumed
// in b with n events of history.
func resumed(t *thread, b *fleet.Box, rec ThreadRecord, n int) {
	why := cmp.Or(rec.SuspendedFor, wire.ExitIdle)
	t.log.Info("suspended thread resumed", "box", b.ID(), "sandbox", b.SandboxID(), "history_events", n)
	t.publish(wire.MustNew(wire.TypeSandboxReplaced, rec.ID, "", wire.SandboxReplaced{
		Reason: why, SandboxID: b.SandboxID(), Restored: n,
		Message: fmt.Sprintf("suspended thread resumed in a new sandbox (it was suspended: %s); workspace and conversation kept", why),
	}))
}

// resumeIn hands rec's thread's history to the agent greeted on conn and
// registers the thread in b, no longer suspended.
func (s *Server) resumeIn(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec ThreadRecord) (*thread, int, error) {
	log := s.log.With("thread", rec.ID)
	n, err := agentlink.SendHistory(conn, s.events, rec.ID, log)
	if err != nil {
		conn.Close()
		return nil, 0, err
	}
	rec.Suspended, rec.SuspendedFor, rec.Box = nil, "", b.ID()
	t, err := s.takeBack(ctx, b, conn, rec, log)
	return t, n, err
}

// takeBack makes the thread of rec, a stored thread whose agent was
// greeted on conn in b, on its stored log (its events numbered after the
// newest), with the policy its creator gave and when it was made, and
// registers it with rec: a resumed thread (resumeIn) and an adopted one
// (adoptThread). On failure conn is closed.
func (s *Server) takeBack(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec ThreadRecord, log *slog.Logger) (*thread, error) {
	last, err := s.events.LastSeq(rec.ID)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read thread log: %w", err)
	}
	t := newThread(s, rec.ID, conn, b, last, log)
	t.gate.SetPolicy(approval.StoredPolicy(s.cfg.Policy, rec.Policy, log)) // bridge/approval
	if !rec.Created.IsZero() {
		t.created = rec.Created
	}
	s.fleet.Linked(b, rec.ID, b.SandboxID())
	if err := s.register(ctx, t, rec); err != nil {
		t.shutdown(wire.Envelope{})
		return nil, err
	}
	return t, nil
}
