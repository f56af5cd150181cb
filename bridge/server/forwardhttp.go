package server

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// forwardedByHeader names the bridge that passed a thread API request on
// (relayedHTTP): the bridge that gets it answers it itself, so a request
// is passed on at most once, even while two bridges disagree for a moment
// about which of them relays the thread.
const forwardedByHeader = "Boxwire-Forwarded-By"

// relayedHTTP passes a request about thread {id} (describe, change,
// delete) to the bridge on the shared store that relays the thread (holds
// its unexpired lease), whose answer becomes this one: the thread's live
// state — its sandbox, clients, egress rules — is there, and so is the
// thread to delete. The request keeps its credential (the bridges share
// the store's keys; a browser session is per bridge and is refused
// there). A relay that announced no address, or cannot be reached, is
// answered 503 sandbox_unavailable naming it. A thread this bridge
// relays, or no bridge does (suspended, gone), is served by h.
func (s *Server) relayedHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if _, shared := s.db.(store.Listener); !shared || r.Header.Get(forwardedByHeader) != "" || s.lookup(id) != nil {
			h.ServeHTTP(w, r)
			return
		}
		holder := s.otherRelay(r.Context(), id)
		if holder == "" {
			h.ServeHTTP(w, r)
			return
		}
		addr := s.bridgeAddress(r.Context(), holder)
		target, err := url.Parse(addr)
		if addr == "" || err != nil {
			httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable,
				"thread "+id+" is relayed by bridge "+holder+", which announced no address this bridge can use")
			return
		}
		log := s.log.With("thread", id, "relay", holder)
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Header.Set(forwardedByHeader, s.cfg.BridgeID)
			},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				log.Warn("pass a thread request to its relay", "err", err)
				httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable,
					"thread "+id+" is relayed by bridge "+holder+", which this bridge cannot reach: "+err.Error())
			},
		}
		log.Debug("thread request passed to its relay", "method", r.Method, "path", r.URL.Path)
		proxy.ServeHTTP(w, r)
	})
}

// otherRelay is the bridge other than this one that holds thread id's
// unexpired lease, "" when none does (or the store cannot tell now).
func (s *Server) otherRelay(ctx context.Context, id string) string {
	ls, err := s.db.Leases(ctx)
	if err != nil {
		s.log.Warn("list leases", "err", err)
		return ""
	}
	for _, l := range ls {
		if l.Thread == id && l.Holder != s.cfg.BridgeID {
			return l.Holder
		}
	}
	return ""
}

// relayedElsewhere returns the threads other bridges on a shared store
// relay (their unexpired leases), each with its relay's id; nil on a
// store of one bridge.
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
