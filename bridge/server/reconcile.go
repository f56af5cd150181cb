package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Reconcile adopts the live sandboxes this bridge (its BridgeID) left
// behind (fleet.Reconcile): each one's proxies are served again, and each
// of its threads is taken back by adoptThread. It removes what expired,
// stopped, cannot be reached or has no thread; a stored thread left
// without a sandbox is suspended and keeps its workspace volume. Call it
// once, before serving. It blocks until done or ctx ends; it fails only
// when the engine cannot list sandboxes.
func (s *Server) Reconcile(ctx context.Context) error {
	return s.fleet.Reconcile(ctx)
}

// adoptThread takes back thread rec of b, a sandbox of an earlier run the
// fleet adopts: it greets the agent again, makes the thread on the stored
// log and registers it (the fleet's Config.Adopt).
func (s *Server) adoptThread(ctx context.Context, b *fleet.Box, rec fleet.ThreadRecord) error {
	conn, err := s.fleet.Greet(ctx, b, rec.ID)
	if err != nil {
		return fmt.Errorf("reach agent: %w", err)
	}
	last, err := s.events.LastSeq(rec.ID)
	if err != nil {
		conn.Close()
		return fmt.Errorf("read thread log: %w", err)
	}
	t := newThread(s, rec.ID, conn, b, last, s.log.With("thread", rec.ID))
	t.gate.SetPolicy(s.storedPolicy(rec)) // approvals.go
	if !rec.Created.IsZero() {
		t.created = rec.Created
	}
	s.fleet.Linked(b, rec.ID, b.SandboxID())
	if err := s.register(ctx, t, rec); err != nil {
		t.shutdown(wire.Envelope{})
		return err
	}
	return nil
}

// Collect removes every sandbox and workspace volume labelled with
// bridgeID, every socket folder under <dataDir>/run and every thread (and
// its log) in <dataDir>/boxwire.db, suspended ones included: what `bridge
// gc` does. Run it only when no bridge with that id is running (the store
// file is locked while one runs). It returns how
// many sandboxes and volumes it removed.
func Collect(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir string) (sandboxes, volumes int, err error) {
	sandboxes, volumes, err = fleet.Collect(ctx, mgr, bridgeID, dataDir)
	if dataDir != "" {
		err = errors.Join(err, forgetThreads(filepath.Join(dataDir, StoreFile)))
	}
	return sandboxes, volumes, err
}

// forgetThreads deletes every thread and its log from the store file at
// path, if there is one: with their sandboxes and volumes gone, suspended
// threads (and the rest) have nothing left to resume.
func forgetThreads(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	ts, err := st.Threads()
	errs := []error{err}
	for _, t := range ts {
		errs = append(errs, st.DeleteThread(t.ID))
	}
	errs = append(errs, st.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gc: forget threads: %w", err)
	}
	return nil
}
