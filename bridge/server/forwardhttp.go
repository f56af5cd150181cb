package server

import (
	"context"
	"net/http"

	"github.com/boxwire/boxwire/bridge/forward"
	"github.com/boxwire/boxwire/bridge/store"
)

// relayedHTTP passes a request about thread {id} (describe, change,
// delete, move files, preview its ports by the path form) to the bridge on the shared store that relays the thread (holds
// its unexpired lease; forward.PassOn), whose answer becomes this one: the
// thread's live state — its sandbox, clients, egress rules — is there, and
// so is the thread to delete. A thread this bridge relays, or no bridge
// does (suspended, gone), and a request passed on already, are served by
// h.
func (s *Server) relayedHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		holder := ""
		if !forward.PassedOn(r) && s.lookup(id) == nil {
			holder = s.relayedElsewhere(r.Context())[id]
		}
		if holder == "" {
			h.ServeHTTP(w, r)
			return
		}
		forward.PassOn(w, r, id, holder, s.bridgeAddress(r.Context(), holder), s.cfg.BridgeID,
			s.log.With("thread", id, "relay", holder))
	})
}

// relayedElsewhere returns the threads other bridges on a shared store
// relay (their unexpired leases), each with its relay's id; nil on a
// store of one bridge, or when the store cannot tell now.
func (s *Server) relayedElsewhere(ctx context.Context) map[string]string {
	if _, shared := s.db.(store.Listener); !shared {
		return nil
	}
	ls, err := s.db.Leases(ctx)
	if err != nil {
		s.log.Warn("list leases", "err", err)
		return nil
	}
	out := map[string]string{}
	for _, l := range ls {
		if l.Holder != s.cfg.BridgeID {
			out[l.Thread] = l.Holder
		}
	}
	return out
}
