package server

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
)

// StoreFile is the name of the store file under Config.DataDir.
const StoreFile = "boxwire.db"

// defaultRetentionInterval is how often retention runs by default.
const defaultRetentionInterval = 10 * time.Minute

// openStore opens <DataDir>/boxwire.db and, when cfg has no ThreadStore,
// makes it the thread store.
func openStore(cfg *Config) (*store.Store, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	if cfg.MaxStoredOutput <= 0 {
		cfg.MaxStoredOutput = DefaultMaxStoredOutput
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = defaultRetentionInterval
	}
	db, err := store.Open(filepath.Join(cfg.DataDir, StoreFile), store.Options{Retention: cfg.Retention, Logger: cfg.Logger, SyncInterval: cfg.StoreSync})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Store == nil {
		cfg.Store = boltThreads{db}
	}
	return db, nil
}

// prune applies the retention every RetentionInterval until the server
// closes; threads with a live thread object are never deleted for age. It
// is started by New and waited for by Close.
func (s *Server) prune() {
	defer s.reaper.Done()
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
			st, gone, err := s.db.Prune(now, func(id string) bool { return s.lookup(id) != nil })
			if err != nil {
				s.log.Error("retention", "err", err)
				continue
			}
			if st.Threads > 0 || st.Events > 0 {
				s.log.Info("retention", "threads_deleted", st.Threads, "events_dropped", st.Events, "threads", gone)
			}
		}
	}
}
