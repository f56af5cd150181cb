// Package storeopen opens the bridge's store from where it is — a
// postgres:// URL (bridge/store/pgstore: several bridges may share it) or
// the bbolt file in the data folder (bridge/store: one bridge) — and, for
// `bridge gc`, forgets a bridge's threads in it (Forget; the sandbox half
// is bridge/fleet/collect). The server, `bridge status` and the admin
// commands open the store through it. It holds nothing open itself and
// never imports the server.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
)

// File is the name of the store file under the data folder.
const File = "boxwire.db"

// Open opens the bridge's store (store.Backend): where is a postgres://
// URL, or "" for the bbolt file <dataDir>/File (the folder is made when
// missing). ctx bounds connecting and migrating. The caller closes the
// store.
func Open(ctx context.Context, where, dataDir string, opt store.Options) (store.Backend, error) {
	if pgstore.IsURL(where) {
		return pgstore.Open(ctx, where, opt)
	}
	if where != "" {
		return nil, fmt.Errorf("store %q: want a postgres:// URL or \"\" for <data-dir>/%s", where, File)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	return store.Open(filepath.Join(dataDir, File), opt)
}

// Relayed returns the threads another bridge than bridgeID holds an
// unexpired lease of in the PostgreSQL store at where: `bridge gc` leaves
// them, and the sandboxes another bridge took over, alone. A bbolt file
// has one bridge: nil.
func Relayed(ctx context.Context, bridgeID, where string) (map[string]bool, error) {
	if !pgstore.IsURL(where) {
		return nil, nil
	}
	st, err := pgstore.Open(ctx, where, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	defer st.Close()
	leases, err := st.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	out := map[string]bool{}
	for _, l := range leases {
		if l.Holder != bridgeID {
			out[l.Thread] = true
		}
	}
	return out, nil
}

// Forget deletes every thread and its log from the store at where (Open),
// if there is one (a bbolt file not made yet is none): with their
// sandboxes and volumes gone, suspended threads (and the rest) have
// nothing left to resume. Threads another bridge than bridgeID holds the
// lease of stay. Run it only when no bridge with that id is running.
func Forget(ctx context.Context, bridgeID, dataDir, where string) error {
	if _, err := os.Stat(filepath.Join(dataDir, File)); where == "" && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := Open(ctx, where, dataDir, store.Options{})
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	ts, err := st.Threads()
	errs := []error{err}
	leases, err := st.Leases(ctx)
	errs = append(errs, err)
	held := map[string]bool{}
	for _, l := range leases {
		held[l.Thread] = l.Holder != bridgeID
	}
	for _, t := range ts {
		if !held[t.ID] {
			errs = append(errs, st.DeleteThread(t.ID))
		}
	}
	errs = append(errs, st.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gc: forget threads: %w", err)
	}
	return nil
}
