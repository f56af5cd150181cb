package server

import (
	"context"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/store"
)

// StoreFile is the name of the store file under Config.DataDir.
const StoreFile = "boxwire.db"

// storeOpenTimeout bounds connecting to the store and migrating it.
const storeOpenTimeout = time.Minute

// defaultRetentionInterval is how often retention runs by default.
const defaultRetentionInterval = 10 * time.Minute

// openStore opens the store (Config.StoreURL, OpenStore) and, when cfg
// has no ThreadStore, makes it the thread store.
func openStore(cfg *Config) (store.Backend, error) {
	if cfg.MaxStoredOutput <= 0 {
		cfg.MaxStoredOutput = DefaultMaxStoredOutput
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = defaultRetentionInterval
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	db, err := OpenStore(ctx, cfg.StoreURL, cfg.DataDir, store.Options{Retention: cfg.Retention, Logger: cfg.Logger, SyncInterval: cfg.StoreSync})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Store == nil {
		cfg.Store = recordstore.Over(db)
	}
	return db, nil
}

// prune applies the retention every RetentionInterval until the server
// closes; threads with a live thread object are never deleted for age. It
// is started by New and waited for by Close.
func (s *Server) prune() {
	defer s.pruner.Done()
	r := s.cfg.Retention
	if r.MaxAge <= 0 && r.MaxEvents <= 0 && r.MaxBytes <= 0 {
		return
	}
	ticker := time.NewTicker(s.cfg.RetentionInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-ticker.C:
			s.pruneOnce(now)
		}
	}
}

// pruneOnce applies the retention at now. A suspended thread deleted for
// age takes its workspace volume with it, unless another thread (of the
// same assistant) still uses it.
func (s *Server) pruneOnce(now time.Time) {
	// Every record's box, not only the suspended ones': a thread
	// suspended between this list and the prune is deleted too, and its
	// volume must go with it. Prune keeps live threads, so each thread it
	// deletes had no sandbox.
	boxes := map[string]string{} // thread id -> box id
	if recs, err := s.cfg.Store.List(s.ctx); err == nil {
		for _, r := range recs {
			boxes[r.ID] = r.Box
		}
	}
	st, gone, err := s.db.Prune(now, func(id string) bool { return s.lookup(id) != nil })
	if err != nil {
		s.log.Error("retention", "err", err)
		return
	}
	if st.Threads > 0 || st.Events > 0 {
		s.log.Info("retention", "threads_deleted", st.Threads, "events_dropped", st.Events, "threads", gone)
	}
	for _, id := range gone {
		if box, ok := boxes[id]; ok && box != "" {
			if err := s.fleet.DropVolumeIfUnused(s.ctx, box); err != nil {
				s.log.Error("retention: remove the workspace of a deleted thread", "thread", id, "box", box, "err", err)
			}
		}
	}
}
