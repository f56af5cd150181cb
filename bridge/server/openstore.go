package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/storeopen"
)

// StoreFile is the name of the store file under Config.DataDir.
const StoreFile = storeopen.File

// OpenStore opens the bridge's store (store.Backend): where is a
// postgres:// URL (bridge/store/pgstore: several bridges may share it),
// or "" for the bbolt file <dataDir>/boxwire.db (one bridge; the folder is
// made when missing): storeopen.Open. ctx bounds connecting and
// migrating. The caller closes the store.
func OpenStore(ctx context.Context, where, dataDir string, opt store.Options) (store.Backend, error) {
	return storeopen.Open(ctx, where, dataDir, opt)
}
