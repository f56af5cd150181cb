// Package retention runs the store's retention for a bridge: every
// Interval it prunes the event log (store.Backend.Prune: threads whose
// newest event is past MaxAge, the oldest events of a thread past
// MaxEvents or MaxBytes), never deleting a live thread for age (Live, or
// one whose lease has not expired: the store's Prune keeps those another
// bridge relays), and
// removes the workspace volume of each thread it deleted unless another
// thread (of the same assistant) still uses it.
//
// The server runs [Run] on a goroutine it starts in New and waits for in
// Close. It imports the store's types and the fleet's records; never the
// server.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/store"
)

// Pruner applies a store's retention (store.Backend has it).
type Pruner interface {
	Prune(now time.Time, live func(id string) bool) (store.PruneStats, []string, error)
}

// Config configures Run and Once. Every field but Retention is required
// when Retention keeps anything out.
type Config struct {
	// Retention is what the store keeps; all zero keeps everything, and
	// Run returns at once.
	Retention store.Retention
	// Interval is the time between two prunes.
	Interval time.Duration
	// Store prunes; Records says which box each thread was of.
	Store   Pruner
	Records records.Store
	// Live reports a thread that has a sandbox now: never deleted for age.
	// It knows only this bridge's threads; Prune also keeps every thread
	// with an unexpired lease, a peer's included.
	Live func(id string) bool
	// DropVolume removes box's workspace volume unless another thread uses
	// it (fleet.DropVolumeIfUnused).
	DropVolume func(ctx context.Context, box string) error
	Log        *slog.Logger
}

// Run prunes every Interval until ctx ends; it returns at once when
// Retention keeps everything.
func Run(ctx context.Context, c Config) {
	r := c.Retention
	if r.MaxAge <= 0 && r.MaxEvents <= 0 && r.MaxBytes <= 0 {
		return
	}
	ticker := time.NewTicker(c.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			Once(ctx, c, now)
		}
	}
}

// Once applies the retention at now. A suspended thread deleted for age
// takes its workspace volume with it, unless another thread still uses
// it.
func Once(ctx context.Context, c Config, now time.Time) {
	// Every record's box, not only the suspended ones': a thread
	// suspended between this list and the prune is deleted too, and its
	// volume must go with it. Prune keeps live threads, so each thread it
	// deletes had no sandbox.
	boxes := map[string]string{} // thread id -> box id
	if recs, err := c.Records.List(ctx); err == nil {
		for _, r := range recs {
			boxes[r.ID] = r.Box
		}
	}
	st, gone, err := c.Store.Prune(now, c.Live)
	if err != nil {
		c.Log.Error("retention", "err", err)
		return
	}
	if st.Threads > 0 || st.Events > 0 {
		c.Log.Info("retention", "threads_deleted", st.Threads, "events_dropped", st.Events, "threads", gone)
	}
	for _, id := range gone {
		if box, ok := boxes[id]; ok && box != "" {
			if err := c.DropVolume(ctx, box); err != nil {
				c.Log.Error("retention: remove the workspace of a deleted thread", "thread", id, "box", box, "err", err)
			}
		}
	}
}
