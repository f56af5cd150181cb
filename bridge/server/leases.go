package server

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/readiness"
)

// DefaultLeaseTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultLeaseTTL = lease.DefaultTTL

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = lease.ErrBridgeIDInUse

// readyTimeout bounds each question to the store or the engine that must
// be answered at once (GET /readyz's, a scrape's).
const readyTimeout = readiness.Timeout

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
