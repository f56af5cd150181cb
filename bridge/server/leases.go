package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultLeaseTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultLeaseTTL = 15 * time.Second

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = errors.New("bridge id in use by another running bridge")

// bridgeLeasePrefix names a bridge's own lease in the store, beside its
// threads' (thread ids never start with it).
const bridgeLeasePrefix = "bridge/"

// leases are what this bridge holds in the store (docs/store.md,
// "Leases"): its own id's lease, held by this process alone (instance), so
// a second bridge started with the same id refuses to run; and the lease
// of each thread it relays, taken before the thread is registered
// (acquire) and renewed with the rest. run renews them until Close;
// release gives them up. Safe for concurrent use.
type leases struct {
	st       store.Leases
	id       string // the bridge id: holder of the threads' leases
	instance string // this process: holder of the bridge's own lease
	ttl      time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	held map[string]time.Time // threads, and when this bridge took each one's lease
	// starting counts the starts (a resume, a takeover) that took a
	// thread's lease before its sandbox is made or adopted (begin).
	starting map[string]int
	address  string // announced to the other bridges (forward.go)

	// lost and takenOver count, for GET /metrics, the leases another
	// bridge took from this one and the threads this one took over.
	lost, takenOver atomic.Uint64
	// reachedSince is when the bridge's own lease was first renewed
	// after it last failed (or the renewer started): see settled.
	reachedSince time.Time // guarded by mu
}

// settled reports whether the store has answered this bridge's renewals
// for a whole TTL: only then does it take over others' threads. After a
// store outage every lease has run out, and the other bridges must have
// the time to renew their own before this one takes them for a dead
// bridge's.
func (l *leases) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.reachedSince.IsZero() && time.Since(l.reachedSince) >= l.ttl
}

// count is how many threads' leases this bridge holds.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// announced records that this bridge's address is in the store: release
// forgets it.
func (l *leases) announced(addr string) {
	l.mu.Lock()
	l.address = addr
	l.mu.Unlock()
}

func newLeases(st store.Leases, bridgeID string, ttl time.Duration, log *slog.Logger) *leases {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return &leases{st: st, id: bridgeID, instance: bridgeID + "/" + hex.EncodeToString(b), ttl: ttl, log: log,
		held: map[string]time.Time{}, starting: map[string]int{}}
}

// claimBridge takes the bridge's own lease. A lease another process holds
// may be a dead bridge's (kill -9): claimBridge waits for it to run out,
// at most one ttl and a second; one still renewed then is a live bridge
// with the same id, ErrBridgeIDInUse.
func (l *leases) claimBridge(ctx context.Context) error {
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

// acquire takes (or renews) the lease of thread for this bridge; another
// bridge's unexpired lease refuses it with a relayedError (forward.go), a
// wire.Error (sandbox_unavailable) that names that bridge.
func (l *leases) acquire(ctx context.Context, thread string) error {
	cur, err := l.st.AcquireLease(ctx, thread, l.id, l.ttl)
	if errors.Is(err, store.ErrLeaseHeld) {
		return relayedError{holder: cur.Holder, werr: wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf(
			"thread %s is relayed by bridge %s (its lease runs until %s): connect to that bridge", thread, cur.Holder, cur.Expires.UTC().Format(time.RFC3339))}}
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.held[thread] = time.Now()
	l.mu.Unlock()
	return nil
}

// begin marks thread as starting until end is called: a resume or a
// takeover takes the lease before it makes or adopts the sandbox, which
// may take long (an image to pull, an agent to greet), and the renewer
// keeps renewing it meanwhile though the thread is not registered yet.
// Before, the renewer released such a lease at its next tick, and another
// bridge could take the thread while it was starting here.
func (l *leases) begin(thread string) (end func()) {
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

// leaseUser is what the lease renewer works for (failover.go): the
// threads registered now, letting go of one whose lease another bridge
// took, and after each renewal what the other bridges did (Peers: take
// over the threads of bridges that are gone, end the connections of keys
// revoked through them).
type leaseUser interface {
	Live() []string
	LetGo(id string)
	Peers(ctx context.Context)
}

// run renews the leases every third of their ttl until ctx ends: the
// bridge's own, and those of u's live threads; a held thread no longer
// live is released. A thread whose lease another bridge took (it expired:
// this bridge could not renew it in time) goes to u.LetGo, which stops
// relaying it. Then u.Peers catches up with the other bridges.
func (l *leases) run(ctx context.Context, u leaseUser) {
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, id := range l.renew(ctx, u.Live()) {
			u.LetGo(id)
		}
		u.Peers(ctx)
	}
}

// holds reports whether this bridge took thread's lease and has not
// released it.
func (l *leases) holds(thread string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[thread]
	return ok
}

// renew renews the leases and returns the live threads another bridge
// holds the lease of now; a lease the store could not renew (it is away)
// is kept and tried again at the next tick.
func (l *leases) renew(ctx context.Context, live []string) (lost []string) {
	_, err := l.st.AcquireLease(ctx, bridgeLeasePrefix+l.id, l.instance, l.ttl)
	if err != nil {
		l.log.Error("renew the bridge's lease", "err", err)
	}
	l.mu.Lock()
	switch {
	case err != nil:
		l.reachedSince = time.Time{}
	case l.reachedSince.IsZero():
		l.reachedSince = time.Now()
	}
	l.mu.Unlock()
	now := map[string]bool{}
	for _, id := range live {
		now[id] = true
		// Acquire renews; it also takes back a lease that ran out while
		// the store was away, unless another bridge took the thread.
		cur, err := l.st.AcquireLease(ctx, id, l.id, l.ttl)
		switch {
		case errors.Is(err, store.ErrLeaseHeld):
			l.log.Warn("lease of a relayed thread lost: another bridge relays it now", "thread", id, "holder", cur.Holder, "epoch", cur.Epoch)
			lost = append(lost, id)
			l.lost.Add(1)
			delete(now, id)
		case err != nil:
			l.log.Error("renew a relayed thread's lease", "thread", id, "err", err)
		}
	}
	l.mu.Lock()
	var gone, starting []string
	for id, at := range l.held {
		switch {
		case now[id]:
		// Being started (begin), or taken since the last tick by a thread
		// about to be registered (Server.register takes it just before).
		case !slices.Contains(lost, id) && (l.starting[id] > 0 || time.Since(at) < l.ttl/3):
			starting = append(starting, id)
		default:
			gone = append(gone, id)
			delete(l.held, id)
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

// drop releases thread's lease at once: a start that took it failed.
func (l *leases) drop(ctx context.Context, thread string) {
	l.mu.Lock()
	delete(l.held, thread)
	l.mu.Unlock()
	if err := l.st.ReleaseLease(ctx, thread, l.id); err != nil {
		l.log.Warn("release a thread's lease", "thread", thread, "err", err)
	}
}

// release gives up every lease this bridge holds, so that another bridge
// may take its threads at once; Close calls it.
func (l *leases) release(ctx context.Context) error {
	l.mu.Lock()
	held, addr := l.held, l.address
	l.held, l.address = map[string]time.Time{}, ""
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

// readyTimeout bounds each check of GET /readyz.
const readyTimeout = 5 * time.Second

// serveReady answers GET /readyz: 200 "ready" when the store and the
// engine answer, else 503 naming what does not (a load balancer sends new
// clients elsewhere; GET /healthz only says the process serves).
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var msg string
	if err := s.db.Ping(ctx); err != nil {
		msg += "store: " + err.Error() + "\n"
	}
	if err := s.cfg.Manager.Ping(ctx); err != nil {
		msg += "engine: " + err.Error() + "\n"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if msg != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(msg))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// ownRecords is the fleet's view of the stored threads: every record but
// those another bridge relays now (its unexpired lease), which this
// bridge's reconcile must neither adopt nor mark suspended, and its reaper
// must not touch. The rest of the bridge sees every record.
type ownRecords struct {
	ThreadStore
	l *leases
}

// List returns the records of the threads no other bridge holds a lease
// of; when the leases cannot be read, it fails rather than hand the
// fleet another bridge's threads.
func (o ownRecords) List(ctx context.Context) ([]ThreadRecord, error) {
	recs, err := o.ThreadStore.List(ctx)
	if err != nil {
		return recs, err
	}
	ls, err := o.l.st.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stored threads: %w", err)
	}
	foreign := map[string]bool{}
	for _, l := range ls {
		foreign[l.Thread] = l.Holder != o.l.id
	}
	out := recs[:0:0]
	for _, r := range recs {
		if !foreign[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}
