package server

import (
	"context"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/readiness"
	"github.com/boxwire/boxwire/bridge/store"
)

// DefaultLeaseTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultLeaseTTL = lease.DefaultTTL

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = lease.ErrBridgeIDInUse

const (
	// readyTimeout bounds each question to the store or the engine that
	// must be answered at once (GET /readyz's, a scrape's).
	readyTimeout = readiness.Timeout
	// settledPoll is how often a resume waiting for this bridge's renewals
	// to settle (awaitSettled) looks again.
	settledPoll = 50 * time.Millisecond
)

// awaitSettled holds up the resume of rec's thread, before it takes the
// thread's lease, until this bridge's renewals are settled
// (lease.Book.Settled) when the thread may be another bridge's whose
// lease has run out: a live (not suspended) thread on a store other
// bridges share, with no unexpired lease (one that has one is refused, or
// renewed, by the lease at once). Right after a store outage every lease
// has run out, and the thread's relay must have the time to renew its own
// before a client's hello here takes the thread over or starts it in a
// second sandbox — the rule the periodic takeover follows (failover.go).
// It blocks at most a lease TTL and a renewal period once the store
// answers; an error is ctx's.
func (s *Server) awaitSettled(ctx context.Context, rec ThreadRecord) error {
	if _, shared := s.db.(store.Listener); !shared || rec.Suspended != nil || s.leases.Settled() {
		return nil
	}
	if ls, err := s.db.Leases(ctx); err == nil {
		for _, l := range ls {
			if l.Thread == rec.ID {
				return nil
			}
		}
	}
	s.log.Info("resume waits for this bridge's lease renewals to settle: the thread's relay may renew its lease first", "thread", rec.ID)
	tick := time.NewTicker(settledPoll)
	defer tick.Stop()
	for !s.leases.Settled() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// ownRecords is the fleet's view of the stored threads: every record but
// those another bridge relays now (its unexpired lease), which this
// bridge's reconcile must neither adopt nor mark suspended, and its reaper
// must not touch. The rest of the bridge sees every record.
type ownRecords struct {
	ThreadStore
	l *lease.Book
}

// List returns the records of the threads no other bridge holds a lease
// of; when the leases cannot be read, it fails rather than hand the
// fleet another bridge's threads.
func (o ownRecords) List(ctx context.Context) ([]ThreadRecord, error) {
	recs, err := o.ThreadStore.List(ctx)
	if err != nil {
		return recs, err
	}
	foreign, err := o.l.Foreign(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stored threads: %w", err)
	}
	out := recs[:0:0]
	for _, r := range recs {
		if !foreign[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}
