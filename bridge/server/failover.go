package server

import (
	"context"
	"errors"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/forward"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Fail-over between bridges on a shared store (issue 22, docs/store.md
// "Fail-over"). The lease renewer (leases.go) works for failover: it
// hands letGo the threads whose lease another bridge took, and has
// takeOverOrphans take the threads of bridges that are gone (and
// users.Recheck close what was revoked through another bridge); a
// client's resume of such a thread takes it over too (takeOverIn).

// closeMoved is the close text of a client whose thread another bridge
// relays now; the close code is closeGoingAway, so it reconnects (to any
// bridge, with after_seq).
const closeMoved = forward.MovedText

// failover is the server as the lease renewer's leaseUser.
type failover struct{ s *Server }

// Live returns the ids of the threads registered now.
func (f failover) Live() []string { return threadDirectory(f).Live() }

// LetGo stops relaying thread id (letGo).
func (f failover) LetGo(id string) { f.s.letGo(id, closeMoved) }

// CutOff stops relaying the threads ids, whose leases ran out while the
// store did not answer this bridge (cutoff.go), unless the store is down
// for the other bridges too.
func (f failover) CutOff(ctx context.Context, ids []string) { f.s.cutOff(ctx, ids) }

// Peers catches up, on a store other bridges share, with what they did:
// it takes over the threads of those that are gone (takeOverOrphans) and
// closes the connections of keys revoked through them (users.Recheck).
func (f failover) Peers(ctx context.Context) {
	if _, shared := f.s.db.(store.Listener); !shared { // one bridge has the bbolt file
		return
	}
	if f.s.leases.Settled() { // not right after a store outage (leases.go)
		f.s.takeOverOrphans(ctx)
	}
	if n, err := f.s.users.Recheck(ctx); err != nil {
		f.s.log.Warn("recheck the credentials of open connections", "err", err)
	} else if n > 0 {
		f.s.log.Info("connections of keys revoked through another bridge closed", "keys", n)
	}
}

// letGo stops relaying thread id, whose lease another bridge took (or may
// have taken: cutOff): its clients are closed (1001 with text), its agent
// connection ends
// without the loss being handled (no sandbox_exited, no replacement), and
// its box leaves the fleet with its sandbox, workspace volume and folders
// left to the new relay (fleet.LetGo). Nothing is written to the thread's
// log. A thread not registered here is ignored.
func (s *Server) letGo(id, text string) {
	unlock := s.fleet.LockThread(id)
	defer unlock()
	s.mu.Lock()
	t := s.threads[id]
	if t != nil {
		delete(s.threads, id)
	}
	s.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	for _, c := range t.clients {
		c.kick(closeGoingAway, text, nil)
	}
	t.mu.Unlock()
	t.shutdown(wire.Envelope{})
	if err := s.fleet.LetGo(t.box, id); err != nil {
		t.log.Error("let go of the sandbox of a thread another bridge relays", "err", err)
	}
	t.log.Warn("stopped relaying the thread", "why", text, "box", t.box.ID())
}

// takeOverOrphans takes over, on a store other bridges share, every
// stored thread whose relay is gone: live (not suspended), with no
// unexpired lease, not relayed here, and not sharing its sandbox with a
// thread another bridge relays (that bridge joins it: failover_shared.go).
// Its running sandbox is adopted (takeOverIn, takeOverShared); one whose
// sandbox is gone is left for its next client's resume.
func (s *Server) takeOverOrphans(ctx context.Context) {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.log.Warn("fail-over: list stored threads", "err", err)
		return
	}
	ls, err := s.db.Leases(ctx)
	if err != nil {
		s.log.Warn("fail-over: list leases", "err", err)
		return
	}
	holder := map[string]string{}
	for _, l := range ls {
		holder[l.Thread] = l.Holder
	}
	elsewhere := map[string]bool{} // the shared boxes of which another bridge relays a thread
	for _, r := range recs {
		if h := holder[r.ID]; r.Scope == wire.ScopeAssistant && r.Suspended == nil && h != "" && h != s.cfg.BridgeID {
			elsewhere[r.Box] = true
		}
	}
	for _, r := range recs {
		if r.Suspended != nil || r.Box == "" || holder[r.ID] != "" || s.leases.Holds(r.ID) || s.lookup(r.ID) != nil ||
			r.Scope == wire.ScopeAssistant && elsewhere[r.Box] {
			continue
		}
		if _, err := s.takeOver(ctx, r.ID); err != nil && !errors.Is(err, fleet.ErrNoSandbox) && !errors.Is(err, fleet.ErrRelayedElsewhere) {
			s.log.Warn("fail-over: take over a thread", "thread", r.ID, "err", err)
		}
	}
}

// takeOver takes thread id's lease and adopts its running sandbox, under
// the thread's lifecycle lock; it returns the thread when this bridge
// relays it then.
func (s *Server) takeOver(ctx context.Context, id string) (*thread, error) {
	unlock := s.fleet.LockThread(id)
	defer unlock()
	if t := s.lookup(id); t != nil {
		return t, nil
	}
	ctx, cancel := s.untilClose(ctx)
	defer cancel()
	rec, ok, err := s.cfg.Store.Get(ctx, id) // again, under the lock
	if err != nil || !ok || rec.Suspended != nil {
		return nil, errors.Join(err, fleet.ErrNoSandbox)
	}
	defer s.leases.Begin(id)() // its lease is renewed while it starts (leases.go)
	// A shared sandbox's threads' leases are taken in id order (failover_shared.go).
	if rec.Scope == wire.ScopeAssistant {
		t, done, err := s.takeOverShared(ctx, rec)
		if !done {
			err = fleet.ErrNoSandbox
		}
		return t, err
	}
	if err := s.leases.Acquire(ctx, id); err != nil {
		return nil, err
	}
	t, done, err := s.takeOverIn(ctx, rec)
	if !done {
		err = fleet.ErrNoSandbox
	}
	if err != nil { // let it go: its next client, or another bridge, tries again
		s.leases.Drop(context.WithoutCancel(ctx), id)
	}
	return t, err
}

// takeOverIn adopts the running sandbox of rec's live thread of thread
// scope, whose lease this bridge has just taken (fleet.TakeOver: its
// proxies served again in its folders, its agent greeted, the thread
// registered on its stored log). done is false when rec is suspended, of
// assistant scope (takeOverShared) or no sandbox of it runs: the caller
// resumes it in a new one. The caller holds the thread's lock.
func (s *Server) takeOverIn(ctx context.Context, rec ThreadRecord) (t *thread, done bool, err error) {
	if rec.Suspended != nil || rec.Scope != wire.ScopeThread {
		return nil, false, nil
	}
	err = s.fleet.TakeOver(ctx, rec.Box, rec.ID)
	if errors.Is(err, fleet.ErrNoSandbox) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	if t = s.lookup(rec.ID); t == nil {
		return nil, true, errors.New("took over the sandbox, but its thread did not start")
	}
	s.tookOver(t)
	return t, true, nil
}
