// Package lease keeps the leases a bridge holds in a shared store
// (docs/store.md, "Leases"): its own id's, so that a second bridge with
// the same id refuses to run, and one per thread it relays, renewed every
// third of their TTL. The server takes a thread's lease before it uses
// the thread and lets go of a thread whose lease another bridge took.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// RelayedError is the refusal of a thread another bridge relays (its
// unexpired lease): the client's error, and that bridge's id. It is
// fleet.ErrRelayedElsewhere for errors.Is.
type RelayedError struct {
	Holder string
	Err    wire.Error
}

func (e RelayedError) Error() string { return e.Err.Error() }

// Unwrap is the client's error.
func (e RelayedError) Unwrap() error { return e.Err }

// Is reports whether target is fleet.ErrRelayedElsewhere.
func (e RelayedError) Is(target error) bool { return target == fleet.ErrRelayedElsewhere }

// DefaultTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultTTL = 15 * time.Second

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = errors.New("bridge id in use by another running bridge")

// bridgeLeasePrefix names a bridge's own lease in the store, beside its
// threads' (thread ids never start with it).
const bridgeLeasePrefix = "bridge/"

// Book is what this bridge holds in the store (docs/store.md,
// "Leases"): its own id's lease, held by this process alone (instance), so
// a second bridge started with the same id refuses to run; and the lease
// of each thread it relays, taken before the thread is registered
// (Acquire) and renewed with the rest. Run renews them until Close;
// Release gives them up. Safe for concurrent use.
type Book struct {
	st       store.Leases
	id       string // the bridge id: holder of the threads' leases
	instance string // this process: holder of the bridge's own lease
	ttl      time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	held map[string]time.Time // threads, and when this bridge took each one's lease
	// renewed is, per thread, when the last take or renewal of its lease
	// that the store answered began: the lease runs at least until then
	// plus the ttl, and may have run out after (Overdue).
	renewed map[string]time.Time
	peers   []store.Bridge // the other bridges, as the store listed them last
	// starting counts the starts (a resume, a takeover) that took a
	// thread's lease before its sandbox is made or adopted (Begin).
	starting map[string]int
	address  string // Announced to the other bridges (forward.go)

	// Lost and TakenOver count, for GET /metrics, the leases another
	// bridge took from this one and the threads this one took over.
	Lost, TakenOver atomic.Uint64
	// reachedSince is when the bridge's own lease was first renewed
	// after it last failed (or the renewer started): see Settled.
	reachedSince time.Time // guarded by mu
}

// Settled reports whether the store has answered this bridge's renewals
// for a whole TTL: only then does it take over others' threads. After a
// store outage every lease has run out, and the other bridges must have
// the time to renew their own before this one takes them for a dead
// bridge's.
func (l *Book) Settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.reachedSince.IsZero() && time.Since(l.reachedSince) >= l.ttl
}

// Instance names this bridge process: the holder of the bridge's own
// lease, "<bridge id>/<random>" (an approval's store.Approval.Holder).
func (l *Book) Instance() string { return l.instance }

// Address is where the other bridges reach this one (Announced), "" when
// it is not announced.
func (l *Book) Address() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.address
}

// Count is how many threads' leases this bridge holds.
func (l *Book) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// Announced records that this bridge's address is in the store: Release
// forgets it.
func (l *Book) Announced(addr string) {
	l.mu.Lock()
	l.address = addr
	l.mu.Unlock()
}

// New returns the leases of bridge bridgeID in st, lasting ttl unrenewed
// (DefaultTTL when 0); a nil log discards.
func New(st store.Leases, bridgeID string, ttl time.Duration, log *slog.Logger) *Book {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return &Book{st: st, id: bridgeID, instance: bridgeID + "/" + hex.EncodeToString(b), ttl: ttl, log: log,
		held: map[string]time.Time{}, renewed: map[string]time.Time{}, starting: map[string]int{}}
}

// ClaimBridge takes the bridge's own lease. A lease another process holds
// may be a dead bridge's (kill -9): ClaimBridge waits for it to run out,
// at most one ttl and a second; one still renewed then is a live bridge
// with the same id, ErrBridgeIDInUse.
func (l *Book) ClaimBridge(ctx context.Context) error {
	deadline := time.Now().Add(l.ttl + time.Second)
	for {
		cur, err := l.st.AcquireLease(ctx, bridgeLeasePrefix+l.id, l.instance, l.ttl)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			return fmt.Errorf("bridge lease: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s (held by %s until %s)", ErrBridgeIDInUse, l.id, cur.Holder, cur.Expires.Format(time.RFC3339))
		}
		l.log.Info("bridge id leased by another process; waiting for it to expire", "bridge_id", l.id, "holder", cur.Holder, "expires", cur.Expires)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(l.ttl/5, time.Second)):
		}
	}
}

// Acquire takes (or renews) the lease of thread for this bridge; another
// bridge's unexpired lease refuses it with a RelayedError, a
// wire.Error (sandbox_unavailable) that names that bridge.
func (l *Book) Acquire(ctx context.Context, thread string) error {
	began := time.Now()
	cur, err := l.st.AcquireLease(ctx, thread, l.id, l.ttl)
	if errors.Is(err, store.ErrLeaseHeld) {
		return RelayedError{Holder: cur.Holder, Err: wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf(
			"thread %s is relayed by bridge %s (its lease runs until %s): connect to that bridge", thread, cur.Holder, cur.Expires.UTC().Format(time.RFC3339))}}
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.held[thread] = time.Now()
	l.renewed[thread] = began
	l.mu.Unlock()
	return nil
}

// Begin marks thread as starting until end is called: a resume or a
// takeover takes the lease before it makes or adopts the sandbox, which
// may take long (an image to pull, an agent to greet), and the renewer
// keeps renewing it meanwhile though the thread is not registered yet.
// Before, the renewer released such a lease at its next tick, and another
// bridge could take the thread while it was starting here.
func (l *Book) Begin(thread string) (end func()) {
	l.mu.Lock()
	l.starting[thread]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.starting[thread]--; l.starting[thread] <= 0 {
			delete(l.starting, thread)
		}
	}
}

// User is what the lease renewer works for (failover.go): the
// threads registered now, letting go of one whose lease another bridge
// took, and after each renewal what the other bridges did (Peers: take
// over the threads of bridges that are gone, end the connections of keys
// revoked through them).
type User interface {
	Live() []string
	LetGo(id string)
	Peers(ctx context.Context)
	// CutOff is told of the live threads whose lease has run out because
	// the store did not answer this bridge's renewals (Overdue): another
	// bridge may relay them by now.
	CutOff(ctx context.Context, ids []string)
}

// Run renews the leases every third of their ttl until ctx ends: the
// bridge's own, and those of u's live threads; a held thread no longer
// live is released. A thread whose lease another bridge took (it expired:
// this bridge could not renew it in time) goes to u.LetGo, which stops
// relaying it; one whose lease ran out while the store did not answer, to
// u.CutOff. Then u.Peers catches up with the other bridges.
func (l *Book) Run(ctx context.Context, u User) {
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, id := range l.Renew(ctx, u.Live()) {
			u.LetGo(id)
		}
		if over := l.Overdue(u.Live()); len(over) > 0 {
			u.CutOff(ctx, over)
		}
		u.Peers(ctx)
	}
}

// Holds reports whether this bridge took thread's lease and has not
// released it.
func (l *Book) Holds(thread string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[thread]
	return ok
}

// Renew renews the leases and returns the live threads another bridge
// holds the lease of now; a lease the store could not renew (it is away)
// is kept and tried again at the next tick. When the store does not renew
// the bridge's own lease, the threads' are not tried this round (they
// would wait for it too). Each call waits at most the ttl.
func (l *Book) Renew(ctx context.Context, live []string) (lost []string) {
	octx, cancel := context.WithTimeout(ctx, l.ttl)
	_, err := l.st.AcquireLease(octx, bridgeLeasePrefix+l.id, l.instance, l.ttl)
	var peers []store.Bridge
	if err == nil {
		peers, _ = l.st.Bridges(octx) // kept for when the store does not answer (CutOff)
	}
	cancel()
	l.mu.Lock()
	switch {
	case err != nil:
		l.reachedSince = time.Time{}
	case l.reachedSince.IsZero():
		l.reachedSince = time.Now()
	}
	if peers != nil {
		l.peers = peers
	}
	l.mu.Unlock()
	if err != nil {
		l.log.Error("renew the bridge's lease", "err", err)
		return nil
	}
	now := map[string]bool{}
	for _, id := range live {
		now[id] = true
		// Acquire renews; it also takes back a lease that ran out while
		// the store was away, unless another bridge took the thread.
		began := time.Now()
		tctx, cancel := context.WithTimeout(ctx, l.ttl)
		cur, err := l.st.AcquireLease(tctx, id, l.id, l.ttl)
		cancel()
		switch {
		case errors.Is(err, store.ErrLeaseHeld):
			l.log.Warn("lease of a relayed thread lost: another bridge relays it now", "thread", id, "holder", cur.Holder, "epoch", cur.Epoch)
			lost = append(lost, id)
			l.Lost.Add(1)
			delete(now, id)
		case err != nil:
			l.log.Error("renew a relayed thread's lease", "thread", id, "err", err)
		default:
			l.mu.Lock()
			l.renewed[id] = began
			l.mu.Unlock()
		}
	}
	l.mu.Lock()
	var gone, starting []string
	for id, at := range l.held {
		switch {
		case now[id]:
		// being started (Begin), or taken since the last tick by a thread
		// about to be registered (Server.register takes it just before).
		case !slices.Contains(lost, id) && (l.starting[id] > 0 || time.Since(at) < l.ttl/3):
			starting = append(starting, id)
		default:
			gone = append(gone, id)
			delete(l.held, id)
			delete(l.renewed, id)
		}
	}
	l.mu.Unlock()
	for _, id := range starting {
		if _, err := l.st.AcquireLease(ctx, id, l.id, l.ttl); err != nil {
			l.log.Warn("renew the lease of a thread being started", "thread", id, "err", err)
		}
	}
	for _, id := range gone {
		if err := l.st.ReleaseLease(ctx, id, l.id); err != nil {
			l.log.Warn("release a thread's lease", "thread", id, "err", err)
		}
	}
	return lost
}

// Drop releases thread's lease at once: a start that took it failed.
func (l *Book) Drop(ctx context.Context, thread string) {
	l.mu.Lock()
	delete(l.held, thread)
	delete(l.renewed, thread)
	l.mu.Unlock()
	if err := l.st.ReleaseLease(ctx, thread, l.id); err != nil {
		l.log.Warn("release a thread's lease", "thread", thread, "err", err)
	}
}

// Release gives up every lease this bridge holds, so that another bridge
// may take its threads at once; Close calls it.
func (l *Book) Release(ctx context.Context) error {
	l.mu.Lock()
	held, addr := l.held, l.address
	l.held, l.renewed, l.address = map[string]time.Time{}, map[string]time.Time{}, ""
	l.mu.Unlock()
	var errs []error
	if addr != "" {
		errs = append(errs, l.st.PutBridge(ctx, store.Bridge{ID: l.id}))
	}
	for id := range held {
		errs = append(errs, l.st.ReleaseLease(ctx, id, l.id))
	}
	errs = append(errs, l.st.ReleaseLease(ctx, bridgeLeasePrefix+l.id, l.instance))
	return errors.Join(errs...)
}

// Foreign returns the threads whose lease in the store another bridge
// holds (true) or this one holds (false).
func (l *Book) Foreign(ctx context.Context) (map[string]bool, error) {
	ls, err := l.st.Leases(ctx)
	if err != nil {
		return nil, err
	}
	foreign := make(map[string]bool, len(ls))
	for _, x := range ls {
		foreign[x.Thread] = x.Holder != l.id
	}
	return foreign, nil
}
