package server

import (
	"context"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/retention"
	"github.com/boxwire/boxwire/bridge/store"
)

// storeOpenTimeout bounds connecting to the store and migrating it.
const storeOpenTimeout = time.Minute

// openStore opens the store (Config.StoreURL, OpenStore) and, when cfg
// has no ThreadStore, makes it the thread store.
func openStore(cfg *Config) (store.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	db, err := OpenStore(ctx, cfg.StoreURL, cfg.DataDir, store.Options{Retention: cfg.Retention, Logger: cfg.Logger, SyncInterval: cfg.StoreSync,
		Holder: cfg.BridgeID}) // writes of a thread another bridge took are dropped (docs/store.md, "Fail-over")
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Store == nil {
		cfg.Store = recordstore.Over(db)
	}
	return db, nil
}

// retentionOf is the store retention of s (bridge/retention), run by New
// on a goroutine Close waits for: threads with a live thread object are
// never deleted for age, and a deleted thread's workspace volume goes
// when nothing else uses it.
func retentionOf(s *Server) retention.Config {
	return retention.Config{Retention: s.cfg.Retention, Interval: s.cfg.RetentionInterval,
		Store: s.db, Records: s.cfg.Store, Live: func(id string) bool { return s.lookup(id) != nil },
		DropVolume: s.fleet.DropVolumeIfUnused, Log: s.log}
}
