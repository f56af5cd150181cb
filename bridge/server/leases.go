package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/boxwire/boxwire/bridge/lease"
)

// DefaultLeaseTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultLeaseTTL = lease.DefaultTTL

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = lease.ErrBridgeIDInUse

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
