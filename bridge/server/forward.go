package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/internal/wsrelay"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A client whose thread another bridge on the store relays (its lease,
// leases.go) is forwarded to that bridge: this bridge dials the relay's
// announced address (store.Bridge) with the client's credential, sends it
// the client's hello, and then copies every message both ways until
// either side ends (docs/store.md, "Forwarding"). So a load balancer in
// front of several bridges needs no stickiness. The relay authenticates
// and authorizes the client again; browser sessions (cookies) are per
// bridge and are not forwarded.

// announce tells the other bridges on the store where they reach this one
// (wsrelay.Advertised: Config.AdvertiseURL, else listening when it names a
// host). Run calls it once it listens.
func (s *Server) announce(listening string) {
	addr := wsrelay.Advertised(s.cfg.AdvertiseURL, listening)
	if addr == "" {
		s.log.Info("not announced to other bridges: set --advertise-url", "listening", listening)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, readyTimeout)
	defer cancel()
	if err := s.db.PutBridge(ctx, store.Bridge{ID: s.cfg.BridgeID, Address: addr}); err != nil {
		s.log.Error("announce this bridge to the others", "err", err)
		return
	}
	s.leases.Announced(addr)
}

// forward serves conn, whose hello (helloEnv) named a thread another
// bridge relays (err a lease.RelayedError), by forwarding it to that bridge. It
// reports false, having done nothing, when err is another error or the
// relay has no announced address; then the caller refuses the client.
func (s *Server) forward(r *http.Request, conn *websocket.Conn, helloEnv wire.Envelope, err error) bool {
	var re lease.RelayedError
	if !errors.As(err, &re) {
		return false
	}
	addr := s.bridgeAddress(r.Context(), re.Holder)
	if addr == "" {
		return false
	}
	log := s.log.With("thread", helloEnv.Thread, "relay", re.Holder, "remote", r.RemoteAddr)
	up, err := wsrelay.Dial(r.Context(), addr, r.Header, helloEnv)
	if err != nil {
		log.Warn("forward a client to the thread's relay", "err", err)
		reject(conn, wire.ErrorEnvelope(helloEnv.Thread, helloEnv.ID, wire.CodeSandboxUnavailable,
			"thread %s is relayed by bridge %s, which this bridge cannot reach: %v", helloEnv.Thread, re.Holder, err), closeNormal)
		return true
	}
	log.Info("client forwarded to the thread's relay")
	wsrelay.Splice(s.ctx, conn, up) // bridge/internal/wsrelay: until either side or the bridge ends
	log.Info("forwarded client detached")
	return true
}

// bridgeAddress is the announced address of bridge id, "" when none.
func (s *Server) bridgeAddress(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	addr, err := wsrelay.Address(ctx, s.db, id)
	if err != nil {
		s.log.Warn("find the relay's address", "err", err)
	}
	return addr
}
