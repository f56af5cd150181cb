package store

import (
	"context"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Backend is everything the bridge keeps: thread records, each thread's
// event log, agent cursor and requests in flight, users, keys and the
// audit log (auth.Store), and the retention that bounds them. The bbolt
// *Store (one bridge, one file) and bridge/store/pgstore's *Store
// (PostgreSQL, several bridges) implement it with the same semantics;
// bridge/store/storetest holds the tests both pass.
//
// Implementations are safe for concurrent use.
//
// Events. A thread's events are numbered by seq, from 1. Append stores an
// event at the seq its caller gave it (the bridge numbers a thread's
// events as it makes them), replacing an event stored there. AppendNext
// has the store number it: one past the thread's newest stored seq,
// decided in the transaction that writes it while the thread is locked,
// so writers that race — goroutines of one bridge or several bridges on
// one database — get consecutive seqs, with no gap and no seq given twice.
// Both queue the event and return at once (unless the queue is full: then
// they block until there is room); a single writer commits whatever is
// queued in one transaction (group commit) and then calls the callbacks,
// in the order of the calls, from its goroutine. So an event can be
// delivered only once it is stored, and per thread the log keeps the order
// of the calls. After Close a callback gets an error at once; for a thread
// deleted before the call, ErrDeleted.
//
// SaveCursor and SaveInflight queue a thread's agent cursor and its list
// of requests in flight behind the events queued before them: each is
// committed with those events or after them, never before, and the newest
// one queued per thread wins. They never fail; after Close or for a
// deleted thread they do nothing. AppendGroup queues an agent's events
// with the cursor that covers them, committed in the same transaction.
// Flush waits until everything queued before it is committed.
//
// Reads (Thread, Threads, Events, LastSeq, Cursor, Inflight) see what is
// committed. A missing thread, cursor or list is not an error: Thread and
// Cursor report ok false, the others an empty result.
//
// DeleteThread and Prune first commit what is queued, then remove; later
// writes to a thread they removed are dropped (ErrDeleted) rather than
// bringing it back.
//
// Users, keys and audit entries (Accounts, an auth.Store) are written at
// once, each durable when its call returns.
//
// Leases (Lease) say which bridge relays each thread: AcquireLease takes
// or renews one, RenewLease only renews, ReleaseLease gives it up; at most
// one holder has a thread's unexpired lease at a time, even when stores
// of several bridges race. Expiry is by the store's clock (the database
// server's for PostgreSQL), so bridges' clocks need not agree. The bbolt
// store keeps them in memory (one process has its file).
//
// Approvals (Approval) are the approval requests waiting for an answer:
// written at once like users; DecideApproval stores the first decision
// and reports later ones as losers. DeleteThread removes the approvals
// that name the thread; Prune those older than a day.
//
// Close commits what is queued, stops the writer and releases the store;
// it is idempotent.
type Backend interface {
	Leases
	Approvals

	// Accounts returns the users, their keys and the audit log; it ends
	// with the store's Close.
	Accounts() auth.Store

	// PutThread creates or replaces a thread record.
	PutThread(t Thread) error
	// Thread returns the record of id; ok is false when there is none.
	Thread(id string) (t Thread, ok bool, err error)
	// Threads returns every thread record, oldest (by Created) first.
	Threads() ([]Thread, error)
	// DeleteThread removes a thread record, its events, cursor and
	// requests in flight. A missing thread is not an error.
	DeleteThread(id string) error

	// Append queues env, which carries its seq, for the thread's log;
	// done, when not nil, gets nil once it is committed.
	Append(thread string, env wire.Envelope, done func(error))
	// AppendGroup queues evs (each carrying its seq) and, when c is not
	// nil, the thread's agent cursor after them, all to be committed in
	// one transaction; done, when not nil, gets the outcome once. An
	// agent's event and the cursor that covers it go together, so a
	// stored cursor is never behind the stored events it covers either (a
	// bridge killed between the two would log the agent's replay of them
	// twice).
	AppendGroup(thread string, evs []wire.Envelope, c *Cursor, done func(error))
	// AppendNext queues env for the thread's log at the seq after the
	// newest stored one (env.Seq is ignored); done, when not nil, gets
	// that seq once it is committed.
	AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error))
	// Events returns up to limit of the thread's stored events with seq >
	// after, oldest first (limit <= 0: all).
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
	// LastSeq returns the seq of the thread's newest stored event, 0 if
	// none.
	LastSeq(thread string) (uint64, error)
	// Flush blocks until everything queued before it is committed.
	Flush()

	// SaveCursor queues the thread's agent cursor; Cursor reads it.
	SaveCursor(thread string, c Cursor)
	Cursor(thread string) (c Cursor, ok bool, err error)
	// SaveInflight queues the thread's whole list of requests in flight
	// (empty: none); Inflight reads it, oldest first.
	SaveInflight(thread string, reqs []wire.Envelope)
	Inflight(thread string) ([]wire.Envelope, error)

	// Prune applies the store's Retention at now: it deletes threads
	// whose newest event is older than MaxAge unless live reports them
	// or, on a store several bridges share, their lease has not expired
	// (another bridge may relay them: live knows only the caller's
	// threads), and drops the oldest events of a thread past MaxEvents or MaxBytes
	// (the newest always stays). It returns the ids it deleted.
	Prune(now time.Time, live func(id string) bool) (PruneStats, []string, error)

	// Ping reports whether the store can be used now (the database
	// answers; the file is open): a bridge's readiness.
	Ping(ctx context.Context) error

	Close() error
}

// Notice says a thread's log grew to Seq (Listener). Resync, with no
// thread, says notices may have been missed (the listener connected
// again): read again whatever is followed.
type Notice struct {
	Thread string
	Seq    uint64
	Resync bool
}

// Listener is a store that tells of appends committed by any of the
// stores (bridges) that share it, for live fan-out to clients of a bridge
// that does not relay the thread itself. pgstore.Store is one (LISTEN/
// NOTIFY); the bbolt store, one process, has no need.
type Listener interface {
	// Listen calls f for commits until ctx ends, then returns its error.
	Listen(ctx context.Context, f func(Notice)) error
}

// Leases are the threads' leases; see Backend and Lease.
type Leases interface {
	// AcquireLease takes the thread's lease for holder until ttl from
	// now, or renews it when holder has it; when another holder's lease
	// has not expired it fails with ErrLeaseHeld and returns that lease.
	AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends holder's unexpired lease to ttl from now, or
	// fails with ErrLeaseLost.
	RenewLease(ctx context.Context, thread, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends holder's lease of thread at once (no lease: no
	// error).
	ReleaseLease(ctx context.Context, thread, holder string) error
	// Leases returns every unexpired lease, by thread.
	Leases(ctx context.Context) ([]Lease, error)
	// PutBridge announces (or forgets, with an empty Address) where other
	// bridges reach bridge b.ID; Bridges lists the announced, by id.
	PutBridge(ctx context.Context, b Bridge) error
	Bridges(ctx context.Context) ([]Bridge, error)
}

// Approvals are the pending approval requests; see Backend and Approval.
type Approvals interface {
	// PutApproval creates or replaces a.
	PutApproval(ctx context.Context, a Approval) error
	// Approval returns the approval id; ok is false when there is none.
	Approval(ctx context.Context, id string) (a Approval, ok bool, err error)
	// Approvals returns the thread's undecided approvals, oldest first.
	Approvals(ctx context.Context, thread string) ([]Approval, error)
	// DecideApproval stores d as id's decision unless it has one; won
	// reports whether d stands, a has the decision that does. An unknown
	// id is ErrNoApproval.
	DecideApproval(ctx context.Context, id string, d wire.ApprovalDecision) (a Approval, won bool, err error)
	// DeleteApproval removes the approval id (missing: no error).
	DeleteApproval(ctx context.Context, id string) error
}

var _ Backend = (*Store)(nil)
