package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
)

// OpenStore opens the bridge's store (store.Backend): where is a
// postgres:// URL (bridge/store/pgstore: several bridges may share it),
// or "" for the bbolt file <dataDir>/boxwire.db (one bridge; the folder is
// made when missing). ctx bounds connecting and migrating. The caller
// closes the store.
func OpenStore(ctx context.Context, where, dataDir string, opt store.Options) (store.Backend, error) {
	if pgstore.IsURL(where) {
		return pgstore.Open(ctx, where, opt)
	}
	if where != "" {
		return nil, fmt.Errorf("store %q: want a postgres:// URL or \"\" for <data-dir>/%s", where, StoreFile)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	return store.Open(filepath.Join(dataDir, StoreFile), opt)
}
