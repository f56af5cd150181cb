package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Fail-over of shared (assistant-scope) sandboxes (docs/store.md,
// "Fail-over"). The agent of a shared sandbox takes any number of bridge
// connections, one per thread, but its threads share what one bridge
// serves: the LLM proxy token a claim sets for the whole agent (each
// bridge's proxy accepts only the tokens it issued), the two proxy
// sockets in the sandbox's folder, and the sandbox's lifecycle (idle
// suspension, recycling, replacement). So one bridge relays every live
// thread of a shared sandbox. A bridge takes one over only with the lease
// of each of its live threads, taken in thread id order: two bridges
// racing for its threads both ask for the first one first, and the one
// refused stops there, holding nothing, and forwards its client to the
// winner. Then it adopts the sandbox once (fleet.TakeOverShared) and joins
// each thread (joinShared).

// claimShared takes, in id order, the lease of every stored thread of the
// shared sandbox box, each marked starting (leases.Begin) until end is
// called: the live ones, which the sandbox serves, and the suspended ones,
// whose lease a bridge holds while it suspends or resumes them (it holds
// the box's name meanwhile). ids are those threads; taken are the ones
// whose lease this bridge did not hold before. When another bridge holds
// one, the leases it took are given back and err is a lease.RelayedError
// naming that bridge, in words for asking's client. Right after a store
// outage it first waits for this bridge's renewals to settle
// (awaitSettled) before it takes a live thread's lease. It blocks for the
// store.
func (s *Server) claimShared(ctx context.Context, box, asking string) (ids, taken []string, end func(), err error) {
	end = func() {}
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return nil, nil, end, fmt.Errorf("list stored threads: %w", err)
	}
	byID := map[string]ThreadRecord{}
	for _, r := range recs {
		if r.Box == box && r.Scope == wire.ScopeAssistant {
			ids = append(ids, r.ID)
			byID[r.ID] = r
		}
	}
	slices.Sort(ids)
	var ends []func()
	end = func() {
		for _, e := range ends {
			e()
		}
	}
	for _, id := range ids {
		held := s.leases.Holds(id)
		if !held {
			if err := s.awaitSettled(ctx, byID[id]); err != nil { // leases.go: its relay renews first
				s.dropLeases(ctx, taken)
				end()
				return ids, nil, func() {}, err
			}
		}
		ends = append(ends, s.leases.Begin(id))
		if err := s.leases.Acquire(ctx, id); err != nil {
			s.dropLeases(ctx, taken)
			end()
			var re lease.RelayedError
			if !errors.As(err, &re) {
				return ids, nil, func() {}, err
			}
			s.log.Info("a thread of the shared sandbox is relayed by another bridge: left to it", "box", box, "thread", id, "holder", re.Holder)
			if asking != "" && asking != id {
				re.Err.Message = fmt.Sprintf("thread %s shares its sandbox with thread %s, which bridge %s relays: connect to that bridge",
					asking, id, re.Holder)
			}
			err = re
			return ids, nil, func() {}, err
		}
		if !held {
			taken = append(taken, id)
		}
	}
	return ids, taken, end, nil
}

// dropLeases gives back the leases of ids that no thread registered here
// uses: a takeover that took them failed.
func (s *Server) dropLeases(ctx context.Context, ids []string) {
	for _, id := range ids {
		if s.lookup(id) == nil {
			s.leases.Drop(context.WithoutCancel(ctx), id)
		}
	}
}

// takeOverShared relays rec's thread in its running shared sandbox (a
// suspended one is resumed in it), and the sandbox's other live threads
// with it: it claims their leases
// (claimShared), has the fleet adopt the sandbox, or find it here
// (fleet.TakeOverShared), and joins rec's thread and then each other one
// whose lock it gets at once (another holder here is starting it, and
// finds the box). done is false when no sandbox of rec's box runs: the
// caller resumes the thread in a new one, taking its lease again. Leases
// it took are given back when it fails. The caller holds rec's thread
// lock and marks it starting (leases.Begin); it blocks for the store, the
// engine and the agent.
func (s *Server) takeOverShared(ctx context.Context, rec ThreadRecord) (t *thread, done bool, err error) {
	ids, taken, end, err := s.claimShared(ctx, rec.Box, rec.ID)
	defer end()
	if err != nil {
		return nil, true, err
	}
	b, err := s.fleet.TakeOverShared(ctx, rec.Box, rec.Assistant)
	if err != nil {
		s.dropLeases(ctx, taken)
		if errors.Is(err, fleet.ErrNoSandbox) {
			return nil, false, nil
		}
		return nil, true, err
	}
	t, err = s.joinShared(ctx, b, rec)
	joined := err == nil
	for _, id := range ids {
		if id != rec.ID && s.joinSibling(ctx, b, id, slices.Contains(taken, id)) {
			joined = true
		}
	}
	s.fleet.Started(b)
	if !joined { // not kept here without threads: the next try adopts it again
		if lerr := s.fleet.LetGo(b, rec.ID); lerr != nil {
			s.log.Warn("let go of a shared sandbox no thread joined", "box", b.ID(), "err", lerr)
		}
	}
	if err != nil && slices.Contains(taken, rec.ID) {
		s.dropLeases(ctx, []string{rec.ID})
	}
	return t, true, err
}

// joinSibling joins thread id, whose lease this bridge holds, to b, the
// shared sandbox it shares with a thread just taken over, unless its
// lock is held (its holder here is starting it, and joins it to b) or it
// runs here already; it reports whether it joined the thread now. When
// the join fails, the lease is given back if drop is set (claimShared
// took it).
func (s *Server) joinSibling(ctx context.Context, b *fleet.Box, id string, drop bool) bool {
	unlock, ok := s.fleet.TryLockThread(id) // the lock order allows no wait: its holder may want ours
	if !ok {
		return false
	}
	defer unlock()
	if s.lookup(id) != nil {
		return false
	}
	rec, found, err := s.cfg.Store.Get(ctx, id)
	if err == nil && found && rec.Suspended == nil && rec.Box == b.ID() {
		if _, err = s.joinShared(ctx, b, rec); err == nil {
			return true
		}
	}
	if err != nil {
		s.log.Warn("fail-over: join a thread to its shared sandbox", "thread", id, "box", b.ID(), "err", err)
	}
	if drop {
		s.dropLeases(ctx, []string{id})
	}
	return false
}

// joinShared registers rec's thread in b, its shared sandbox, which this
// bridge runs now. A suspended thread is resumed in it (its history
// handed over, sandbox_replaced logged as for any resume). When b's agent
// is the one a live thread last spoke to (the instance it greets with is
// the stored agent cursor's), it has the thread's conversation and
// backlog: the thread is adopted and its events go on from the cursor.
// Otherwise the sandbox was made again since, and the thread is resumed
// in it with sandbox_replaced saying so.
func (s *Server) joinShared(ctx context.Context, b *fleet.Box, rec ThreadRecord) (*thread, error) {
	conn, instance, err := s.fleet.Rejoin(ctx, b, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("reach agent: %w", err)
	}
	if rec.Suspended != nil {
		t, n, err := s.resumeIn(ctx, b, conn, rec)
		if err == nil {
			resumed(t, b, rec, n)
		}
		return t, err
	}
	cur, same, err := s.events.Cursor(rec.ID)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read agent cursor: %w", err)
	}
	if same = same && instance != "" && cur.Instance == instance; same {
		t, err := s.takeBack(ctx, b, conn, rec, s.log.With("thread", rec.ID))
		if err == nil {
			s.tookOver(t)
		}
		return t, err
	}
	t, n, err := s.resumeIn(ctx, b, conn, rec)
	if err != nil {
		return nil, err
	}
	t.log.Info("thread resumed in its shared sandbox, made again while no bridge relayed it", "box", b.ID(), "sandbox", b.SandboxID(), "history_events", n)
	t.publish(wire.MustNew(wire.TypeSandboxReplaced, rec.ID, "", wire.SandboxReplaced{
		Reason: wire.ExitDied, SandboxID: b.SandboxID(), Restored: n,
		Message: "the assistant's shared sandbox was made again while no bridge relayed this thread; workspace and conversation kept",
	}))
	return t, nil
}

// tookOver counts and logs t, a thread this bridge took over in the
// sandbox another bridge (or an earlier run of this one) left running.
func (s *Server) tookOver(t *thread) {
	s.leases.TakenOver.Add(1)
	t.log.Info("took over a thread whose bridge is gone", "box", t.box.ID(), "sandbox", t.box.SandboxID())
}
