package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/store"
)

// The cases every store.Backend passes are in storetest (TestBackend);
// these are the bbolt store's own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One process at a time: a second Open of the file fails at once with
// ErrLocked (a second bridge on the same data folder).
func TestSecondOpenIsLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := store.Open(path, store.Options{}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}
