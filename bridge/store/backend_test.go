package store_test

import (
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/storetest"
)

// The bbolt store passes the suite every store.Backend passes.
func TestBackend(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Config{New: func(t *testing.T) storetest.Open {
		path := filepath.Join(t.TempDir(), "boxwire.db")
		return func(opt store.Options) (store.Backend, error) { return store.Open(path, opt) }
	}})
}
