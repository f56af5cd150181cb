package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/fleet/collect"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/storeopen"
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
	_, err = s.takeBack(ctx, b, conn, rec, s.log.With("thread", rec.ID)) // suspend.go
	return err
}

// Collect removes every sandbox and workspace volume labelled with
// bridgeID, every socket folder under <dataDir>/run and every thread (and
// its log) in <dataDir>/boxwire.db, suspended ones included: what `bridge
// gc` does (CollectIn for another store). Run it only when no bridge with that id is running (the store
// file is locked while one runs). It returns how
// many sandboxes and volumes it removed.
func Collect(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir string) (sandboxes, volumes int, err error) {
	return CollectIn(ctx, mgr, bridgeID, dataDir, "")
}

// CollectIn is Collect with the threads forgotten in the store at
// storeURL (OpenStore; "" is <dataDir>/boxwire.db). A PostgreSQL store
// may be shared by several bridges: there it forgets every thread but
// those another bridge holds an unexpired lease of, and leaves their
// sandboxes (another bridge took them over), volumes and folders.
func CollectIn(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir, storeURL string) (sandboxes, volumes int, err error) {
	relayed, err := storeopen.Relayed(ctx, bridgeID, storeURL) // their sandboxes stay too (failover.go)
	if err != nil {
		return 0, 0, err
	}
	sandboxes, volumes, err = collect.Collect(ctx, mgr, bridgeID, dataDir, func(th string) bool { return relayed[th] })
	if dataDir != "" || storeURL != "" {
		err = errors.Join(err, storeopen.Forget(ctx, bridgeID, dataDir, storeURL)) // bridge/storeopen
	}
	return sandboxes, volumes, err
}
