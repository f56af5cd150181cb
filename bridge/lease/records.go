package lease

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/fleet"
)

// OwnRecords is the fleet's view of the stored threads: every record but
// those another bridge relays now (its unexpired lease in Book), which
// this bridge's reconcile must neither adopt nor mark suspended, and its
// reaper must not touch. The rest of the bridge sees every record.
type OwnRecords struct {
	fleet.Records
	Book *Book
}

// List returns the records of the threads no other bridge holds a lease
// of; when the leases cannot be read, it fails rather than hand the
// fleet another bridge's threads.
func (o OwnRecords) List(ctx context.Context) ([]fleet.ThreadRecord, error) {
	recs, err := o.Records.List(ctx)
	if err != nil {
		return recs, err
	}
	foreign, err := o.Book.Foreign(ctx)
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
