// Package failover is fail-over between bridges on a shared store (issue
// 22, docs/store.md "Fail-over"): which stored threads this bridge takes
// over, in what order it takes their leases, and when it stops relaying a
// thread another bridge may have taken. It is the bridge's lease.User: the
// lease renewer (bridge/lease) hands it the threads whose lease another
// bridge took (LetGo), those whose lease ran out while the store did not
// answer (CutOff), and, every renewal, the chance to take the threads of
// bridges that are gone (Peers). A client's resume of such a thread takes
// it over too (TakeOver, TakeOverIn, TakeOverShared, called by the
// bridge's resume).
//
// It knows the bridge's threads only through Threads: whether one is
// relayed here, letting one go, and registering one in a sandbox the
// fleet adopted or found (Adopt, Resume). The sandboxes are the fleet's
// (fleet.TakeOver, fleet.TakeOverShared), the leases a lease.Book's.
package failover

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/readiness"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// MovedText is the close text of a client whose thread another bridge
// relays now; the close code is 1001, so it reconnects (to any bridge,
// with after_seq).
const MovedText = "thread moved to another bridge: reconnect"

// CutOffText is the close text of a client whose bridge lost the store
// and, with it, the lease of the client's thread (close code 1001: it
// reconnects, to any bridge).
const CutOffText = "this bridge cannot reach the store and no longer holds the thread's lease: reconnect"

// settledPoll is how often a resume waiting for this bridge's renewals to
// settle (AwaitSettled) looks again.
const settledPoll = 50 * time.Millisecond

// Threads is the bridge's live threads as fail-over sees them.
type Threads interface {
	// Live returns the ids of the threads relayed here now.
	Live() []string
	// Relays reports whether thread id is relayed here now.
	Relays(id string) bool
	// LetGo stops relaying thread id, whose lease another bridge took
	// (or may have taken), closing its clients (1001) with text; its
	// sandbox, volume and folders are left to the next relay. A thread
	// not relayed here is ignored.
	LetGo(id, text string)
	// Adopt registers rec's thread, whose agent in b (greeted on conn)
	// has its conversation: its events go on from its stored cursor. On
	// failure conn is closed.
	Adopt(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec fleet.ThreadRecord) error
	// Resume registers rec's thread in b, handing its history to the
	// agent greeted on conn, with sandbox_replaced in its log: rec was
	// suspended, or (remade) its shared sandbox was made again while no
	// bridge relayed it. On failure conn is closed.
	Resume(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec fleet.ThreadRecord, remade bool) error
}

// Store is what fail-over reads of the shared store.
type Store interface {
	// Leases are the threads' unexpired leases, every bridge's.
	Leases(ctx context.Context) ([]store.Lease, error)
	// Cursor is thread's stored agent cursor.
	Cursor(thread string) (c store.Cursor, ok bool, err error)
}

// Config is what a Failover works with. Every field but Log is required.
type Config struct {
	BridgeID string
	Threads  Threads
	// Fleet returns the bridge's fleet, which is made after its
	// Failover (the fleet's hooks call ClaimShared, which needs none).
	Fleet   func() *fleet.Fleet
	Records fleet.Records // every stored thread, other bridges' too
	Store   Store
	// Shared reports whether other bridges share the store (PostgreSQL):
	// with one bridge (bbolt) there is nothing to take over, and the
	// leases are in memory and always renewed.
	Shared bool
	Leases *lease.Book
	// Recheck closes the connections of keys revoked through another
	// bridge (users.Recheck); it returns how many keys.
	Recheck func(ctx context.Context) (int, error)
	Log     *slog.Logger // nil: discard
}

// Failover is one bridge's fail-over. Safe for concurrent use.
type Failover struct {
	cfg Config
	log *slog.Logger
}

// New returns the bridge's Failover; pass it to the lease renewer
// (lease.Book.Run).
func New(cfg Config) *Failover {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Failover{cfg: cfg, log: cfg.Log}
}

var _ lease.User = (*Failover)(nil)

// Live returns the ids of the threads relayed here now (lease.User).
func (f *Failover) Live() []string { return f.cfg.Threads.Live() }

// LetGo stops relaying thread id, whose lease another bridge took
// (lease.User).
func (f *Failover) LetGo(id string) { f.cfg.Threads.LetGo(id, MovedText) }

// CutOff stops relaying the threads ids, whose leases ran out while the
// store did not answer this bridge (lease.User), unless the store is
// down for the other bridges too (readiness.StoreDownEverywhere): then
// nobody can take a lease meanwhile, and this bridge keeps its threads
// until the store is back (as after a database restart). With no other
// bridge known it keeps them too.
func (f *Failover) CutOff(ctx context.Context, ids []string) {
	if !f.cfg.Shared {
		return
	}
	if readiness.StoreDownEverywhere(ctx, f.cfg.Leases.Peers()) {
		f.log.Info("leases ran out while the store is down for every bridge: still relaying the threads", "threads", len(ids))
		return
	}
	f.log.Error("cut off from the store past the leases' expiry: another bridge may relay the threads now", "threads", len(ids))
	for _, id := range ids {
		f.cfg.Threads.LetGo(id, CutOffText)
	}
}

// Peers catches up, on a store other bridges share, with what they did
// (lease.User): it takes over the threads of those that are gone
// (takeOverOrphans) and closes the connections of keys revoked through
// them (Config.Recheck).
func (f *Failover) Peers(ctx context.Context) {
	if !f.cfg.Shared {
		return
	}
	if f.cfg.Leases.Settled() { // not right after a store outage (AwaitSettled)
		f.takeOverOrphans(ctx)
	}
	if n, err := f.cfg.Recheck(ctx); err != nil {
		f.log.Warn("recheck the credentials of open connections", "err", err)
	} else if n > 0 {
		f.log.Info("connections of keys revoked through another bridge closed", "keys", n)
	}
}

// AwaitSettled holds up the resume of rec's thread, before it takes the
// thread's lease, until this bridge's renewals are settled
// (lease.Book.Settled) when the thread may be another bridge's whose
// lease has run out: a live (not suspended) thread on a shared store,
// with no unexpired lease (one that has one is refused, or renewed, by
// the lease at once). Right after a store outage every lease has run out,
// and the thread's relay must have the time to renew its own before a
// client's hello here takes the thread over or starts it in a second
// sandbox — the rule the periodic takeover follows. It blocks at most a
// lease TTL and a renewal period once the store answers; an error is
// ctx's.
func (f *Failover) AwaitSettled(ctx context.Context, rec fleet.ThreadRecord) error {
	if !f.cfg.Shared || rec.Suspended != nil || f.cfg.Leases.Settled() {
		return nil
	}
	if ls, err := f.cfg.Store.Leases(ctx); err == nil {
		for _, l := range ls {
			if l.Thread == rec.ID {
				return nil
			}
		}
	}
	f.log.Info("resume waits for this bridge's lease renewals to settle: the thread's relay may renew its lease first", "thread", rec.ID)
	tick := time.NewTicker(settledPoll)
	defer tick.Stop()
	for !f.cfg.Leases.Settled() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// takeOverOrphans takes over every stored thread whose relay is gone:
// live (not suspended), with no unexpired lease, not relayed here, and
// not sharing its sandbox with a thread another bridge relays (that
// bridge joins it: shared.go). Its running sandbox is adopted (TakeOver);
// one whose sandbox is gone is left for its next client's resume.
func (f *Failover) takeOverOrphans(ctx context.Context) {
	recs, err := f.cfg.Records.List(ctx)
	if err != nil {
		f.log.Warn("fail-over: list stored threads", "err", err)
		return
	}
	ls, err := f.cfg.Store.Leases(ctx)
	if err != nil {
		f.log.Warn("fail-over: list leases", "err", err)
		return
	}
	holder := map[string]string{}
	for _, l := range ls {
		holder[l.Thread] = l.Holder
	}
	elsewhere := map[string]bool{} // the shared boxes of which another bridge relays a thread
	for _, r := range recs {
		if h := holder[r.ID]; r.Scope == wire.ScopeAssistant && r.Suspended == nil && h != "" && h != f.cfg.BridgeID {
			elsewhere[r.Box] = true
		}
	}
	for _, r := range recs {
		if r.Suspended != nil || r.Box == "" || holder[r.ID] != "" || f.cfg.Leases.Holds(r.ID) || f.cfg.Threads.Relays(r.ID) ||
			r.Scope == wire.ScopeAssistant && elsewhere[r.Box] {
			continue
		}
		if err := f.TakeOver(ctx, r.ID); err != nil && !errors.Is(err, fleet.ErrNoSandbox) && !errors.Is(err, fleet.ErrRelayedElsewhere) {
			f.log.Warn("fail-over: take over a thread", "thread", r.ID, "err", err)
		}
	}
}

// TakeOver takes thread id's lease and adopts its running sandbox, under
// the thread's lifecycle lock; nil when this bridge relays the thread
// then. ctx should end when the bridge closes. fleet.ErrNoSandbox: the
// thread is suspended, gone, or no sandbox of it runs.
func (f *Failover) TakeOver(ctx context.Context, id string) error {
	unlock := f.cfg.Fleet().Locks().Thread(id)
	defer unlock()
	if f.cfg.Threads.Relays(id) {
		return nil
	}
	rec, ok, err := f.cfg.Records.Get(ctx, id) // again, under the lock
	if err != nil || !ok || rec.Suspended != nil {
		return errors.Join(err, fleet.ErrNoSandbox)
	}
	defer f.cfg.Leases.Begin(id)() // its lease is renewed while it starts
	// A shared sandbox's threads' leases are taken in id order (shared.go).
	if rec.Scope == wire.ScopeAssistant {
		done, err := f.TakeOverShared(ctx, rec)
		if !done {
			err = fleet.ErrNoSandbox
		}
		return err
	}
	if err := f.cfg.Leases.Acquire(ctx, id); err != nil {
		return err
	}
	done, err := f.TakeOverIn(ctx, rec)
	if !done {
		err = fleet.ErrNoSandbox
	}
	if err != nil { // let it go: its next client, or another bridge, tries again
		f.cfg.Leases.Drop(context.WithoutCancel(ctx), id)
	}
	return err
}

// TakeOverIn adopts the running sandbox of rec's live thread of thread
// scope, whose lease this bridge has just taken (fleet.TakeOver: its
// proxies served again in its folders, its agent greeted, the thread
// registered on its stored log). done is false when rec is suspended, of
// assistant scope (TakeOverShared) or no sandbox of it runs: the caller
// resumes it in a new one. The caller holds the thread's lock.
func (f *Failover) TakeOverIn(ctx context.Context, rec fleet.ThreadRecord) (done bool, err error) {
	if rec.Suspended != nil || rec.Scope != wire.ScopeThread {
		return false, nil
	}
	err = f.cfg.Fleet().TakeOver(ctx, rec.Box, rec.ID)
	if errors.Is(err, fleet.ErrNoSandbox) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if !f.cfg.Threads.Relays(rec.ID) {
		return true, errors.New("took over the sandbox, but its thread did not start")
	}
	f.tookOver(rec.ID, rec.Box)
	return true, nil
}

// tookOver counts and logs thread id, which this bridge took over in the
// sandbox of box another bridge (or an earlier run of this one) left
// running.
func (f *Failover) tookOver(id, box string) {
	f.cfg.Leases.TakenOver.Add(1)
	f.log.Info("took over a thread whose bridge is gone", "thread", id, "box", box)
}
