package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/readiness"
	"github.com/boxwire/boxwire/bridge/store"
)

// A bridge cut off from the store (docs/store.md, "Fail-over") cannot
// renew its threads' leases; once they have run out by its own clock
// (lease.Book.Overdue) another bridge may have taken them over and
// reconnected to their agents. It then stops relaying them — their
// clients closed with closeCutOff, their agent connections ended, their
// sandboxes left running (letGo) — unless the store is down for every
// bridge: when the other bridges it knows say so themselves (their
// /readyz names the store), nobody can take a lease meanwhile, and each
// bridge keeps its threads until the store is back (as after a database
// restart). With no other bridge known it keeps them too.

// closeCutOff is the close text of a client whose bridge lost the store
// and, with it, the lease of the client's thread (close code 1001: it
// reconnects, to any bridge).
const closeCutOff = "this bridge cannot reach the store and no longer holds the thread's lease: reconnect"

// cutOff stops relaying the threads ids, whose leases ran out while the
// store did not answer, unless the other bridges say the store is down
// for them too (readiness.StoreDownEverywhere). Only on a store several bridges
// share: the bbolt store's leases are in memory and always renewed.
func (s *Server) cutOff(ctx context.Context, ids []string) {
	if _, shared := s.db.(store.Listener); !shared {
		return
	}
	if readiness.StoreDownEverywhere(ctx, s.leases.Peers()) {
		s.log.Info("leases ran out while the store is down for every bridge: still relaying the threads", "threads", len(ids))
		return
	}
	s.log.Error("cut off from the store past the leases' expiry: another bridge may relay the threads now", "threads", len(ids))
	for _, id := range ids {
		s.letGo(id, closeCutOff)
	}
}
