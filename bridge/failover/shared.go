package failover

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

// ClaimShared takes, in id order, the lease of every stored thread of the
// shared sandbox box, each marked starting (leases.Begin) until end is
// called: the live ones, which the sandbox serves, and the suspended ones,
// whose lease a bridge holds while it suspends or resumes them (it holds
// the box's name meanwhile). ids are those threads; taken are the ones
// whose lease this bridge did not hold before. When another bridge holds
// one, the leases it took are given back and err is a lease.RelayedError
// naming that bridge, in words for asking's client. Right after a store
// outage it first waits for this bridge's renewals to settle
// (AwaitSettled) before it takes a live thread's lease. It blocks for the
// store.
func (f *Failover) ClaimShared(ctx context.Context, box, asking string) (ids, taken []string, end func(), err error) {
	end = func() {}
	recs, err := f.cfg.Records.List(ctx)
	if err != nil {
		return nil, nil, end, fmt.Errorf("list stored threads: %w", err)
	}
	byID := map[string]fleet.ThreadRecord{}
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
		held := f.cfg.Leases.Holds(id)
		if !held {
			if err := f.AwaitSettled(ctx, byID[id]); err != nil { // its relay renews first
				f.dropLeases(ctx, taken)
				end()
				return ids, nil, func() {}, err
			}
		}
		ends = append(ends, f.cfg.Leases.Begin(id))
		if err := f.cfg.Leases.Acquire(ctx, id); err != nil {
			f.dropLeases(ctx, taken)
			end()
			var re lease.RelayedError
			if !errors.As(err, &re) {
				return ids, nil, func() {}, err
			}
			f.log.Info("a thread of the shared sandbox is relayed by another bridge: left to it", "box", box, "thread", id, "holder", re.Holder)
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
func (f *Failover) dropLeases(ctx context.Context, ids []string) {
	for _, id := range ids {
		if !f.cfg.Threads.Relays(id) {
			f.cfg.Leases.Drop(context.WithoutCancel(ctx), id)
		}
	}
}

// TakeOverShared relays rec's thread in its running shared sandbox (a
// suspended one is resumed in it), and the sandbox's other live threads
// with it: it claims their leases
// (ClaimShared), has the fleet adopt the sandbox, or find it here
// (fleet.TakeOverShared), and joins rec's thread and then each other one
// whose lock it gets at once (another holder here is starting it, and
// finds the box). done is false when no sandbox of rec's box runs: the
// caller resumes the thread in a new one, taking its lease again. Leases
// it took are given back when it fails. The caller holds rec's thread
// lock and marks it starting (leases.Begin); it blocks for the store, the
// engine and the agent.
func (f *Failover) TakeOverShared(ctx context.Context, rec fleet.ThreadRecord) (done bool, err error) {
	ids, taken, end, err := f.ClaimShared(ctx, rec.Box, rec.ID)
	defer end()
	if err != nil {
		return true, err
	}
	b, err := f.cfg.Fleet().TakeOverShared(ctx, rec.Box, rec.Assistant)
	if err != nil {
		f.dropLeases(ctx, taken)
		if errors.Is(err, fleet.ErrNoSandbox) {
			return false, nil
		}
		return true, err
	}
	err = f.joinShared(ctx, b, rec)
	joined := err == nil
	for _, id := range ids {
		if id != rec.ID && f.joinSibling(ctx, b, id, slices.Contains(taken, id)) {
			joined = true
		}
	}
	f.cfg.Fleet().Started(b)
	if !joined { // not kept here without threads: the next try adopts it again
		if lerr := f.cfg.Fleet().LetGo(b, rec.ID); lerr != nil {
			f.log.Warn("let go of a shared sandbox no thread joined", "box", b.ID(), "err", lerr)
		}
	}
	if err != nil && slices.Contains(taken, rec.ID) {
		f.dropLeases(ctx, []string{rec.ID})
	}
	return true, err
}

// joinSibling joins thread id, whose lease this bridge holds, to b, the
// shared sandbox it shares with a thread just taken over, unless its
// lock is held (its holder here is starting it, and joins it to b) or it
// runs here already; it reports whether it joined the thread now. When
// the join fails, the lease is given back if drop is set (claimShared
// took it).
func (f *Failover) joinSibling(ctx context.Context, b *fleet.Box, id string, drop bool) bool {
	unlock, ok := f.cfg.Fleet().Locks().TryThread(id) // the lock order allows no wait: its holder may want ours
	if !ok {
		return false
	}
	defer unlock()
	if f.cfg.Threads.Relays(id) {
		return false
	}
	rec, found, err := f.cfg.Records.Get(ctx, id)
	if err == nil && found && rec.Suspended == nil && rec.Box == b.ID() {
		if err = f.joinShared(ctx, b, rec); err == nil {
			return true
		}
	}
	if err != nil {
		f.log.Warn("fail-over: join a thread to its shared sandbox", "thread", id, "box", b.ID(), "err", err)
	}
	if drop {
		f.dropLeases(ctx, []string{id})
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
func (f *Failover) joinShared(ctx context.Context, b *fleet.Box, rec fleet.ThreadRecord) error {
	conn, instance, err := f.cfg.Fleet().Rejoin(ctx, b, rec.ID)
	if err != nil {
		return fmt.Errorf("reach agent: %w", err)
	}
	if rec.Suspended != nil {
		return f.cfg.Threads.Resume(ctx, b, conn, rec, false)
	}
	cur, same, err := f.cfg.Store.Cursor(rec.ID)
	if err != nil {
		conn.Close()
		return fmt.Errorf("read agent cursor: %w", err)
	}
	if same && instance != "" && cur.Instance == instance {
		if err := f.cfg.Threads.Adopt(ctx, b, conn, rec); err != nil {
			return err
		}
		f.tookOver(rec.ID, b.ID())
		return nil
	}
	return f.cfg.Threads.Resume(ctx, b, conn, rec, true)
}
