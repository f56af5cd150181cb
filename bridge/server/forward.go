package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/forward"
	"github.com/boxwire/boxwire/bridge/internal/wsrelay"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/web"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A client whose thread another bridge on the store relays (its lease,
// leases.go) is served by the bridge it reached, as a forwarded client
// (bridge/forward; docs/store.md, "Forwarding"): here the server finds the
// relay (relays) and hands the connection to its forward.Hub.

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
// bridge relays (err a lease.RelayedError), as a forwarded client
// (bridge/forward) until it ends. It reports false, having done nothing,
// when err is another error, the store tells no bridge of another's
// commits (bbolt: one bridge), or the relay has no announced address;
// then the caller refuses the client. A relay's refusal that stands
// (forward.Refused: the credential, or the hello for good) is passed on;
// a relay that cannot be reached, or refuses for now, is answered
// sandbox_unavailable.
func (s *Server) forward(r *http.Request, conn *websocket.Conn, helloEnv wire.Envelope, err error) bool {
	var re lease.RelayedError
	if !errors.As(err, &re) {
		return false
	}
	listener, shared := s.db.(store.Listener)
	if !shared {
		return false
	}
	addr := s.bridgeAddress(r.Context(), re.Holder)
	if addr == "" {
		return false
	}
	var hello wire.Hello
	if err := helloEnv.Decode(&hello); err != nil {
		return false
	}
	log := s.log.With("thread", hello.Thread, "remote", r.RemoteAddr) // the thread is named in the payload
	hub := s.forwardHub(listener)
	f := hub.NewClient(conn, hello, helloEnv.ID, web.RelayCredential(r), log)
	up, err := f.Dial(r.Context(), addr)
	if ref, final := forward.Refused(err); final { // the relay's answer stands: pass it on
		log.Info("forwarded client refused by the thread's relay", "relay", re.Holder, "err", err)
		reject(conn, wire.ErrorEnvelope(hello.Thread, helloEnv.ID, ref.Code, "%s", ref.Message), ref.Close)
		return true
	}
	if err != nil {
		log.Warn("forward a client to the thread's relay", "relay", re.Holder, "err", err)
		reject(conn, wire.ErrorEnvelope(hello.Thread, helloEnv.ID, wire.CodeSandboxUnavailable,
			"thread %s is relayed by bridge %s, which this bridge cannot reach: %v", hello.Thread, re.Holder, err), closeNormal)
		return true
	}
	log.Info("client forwarded to the thread's relay: its events come from the store", "relay", re.Holder)
	stopRevoke := s.users.Watch(r.Context(), f.Revoke) // revoked here, or through another bridge (users.Recheck)
	defer stopRevoke()
	hub.Serve(f, up)
	log.Info("forwarded client detached")
	return true
}

// forwardHub is the server's forward.Hub over l, made on first use.
func (s *Server) forwardHub(l store.Listener) *forward.Hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fwd == nil {
		s.fwd = forward.NewHub(s.ctx, forward.Config{
			Store: s.db, Listener: l, Relays: relays{s}, Software: s.cfg.Software, Log: s.log,
			Limits: forward.Limits{WriteWait: writeWait, PongWait: pongWait, PingPeriod: pingPeriod, HelloTimeout: helloTimeout,
				ReadLimit: hardFrameBytes, SendBuffer: clientSendBuffer, Batch: replayBatch},
			Enter: s.enter, Done: s.conns.Done,
		})
	}
	return s.fwd
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

// relays is the server as its forward.Hub's Relays.
type relays struct{ s *Server }

// Address is where a forwarded client of thread id sends its
// requests now: the announced address of the bridge that holds the
// thread's lease, this bridge's own when it relays the thread
// (forward.ErrNoAddress when it announced none), or "" when none can be
// had yet (a takeover by this bridge under way among them). When no
// bridge holds the lease, and this bridge's renewals are settled (not
// right after a store outage: leases.go), it resumes the thread as a
// client's hello would (a takeover, or a new sandbox). A thread that is
// gone is forward.ErrThreadGone.
func (rs relays) Address(ctx context.Context, id string) (string, error) {
	s := rs.s
	here := func() (string, error) {
		if own := s.leases.Address(); own != "" {
			return own, nil
		}
		return "", forward.ErrNoAddress
	}
	if s.lookup(id) != nil {
		return here()
	}
	ls, err := s.db.Leases(ctx)
	if err != nil {
		return "", nil
	}
	for _, l := range ls {
		if l.Thread != id {
			continue
		}
		if l.Holder == s.cfg.BridgeID { // being started here
			return "", nil
		}
		return s.bridgeAddress(ctx, l.Holder), nil
	}
	if !s.leases.Settled() {
		return "", nil
	}
	t, found, err := s.resumeThread(ctx, id)
	var re lease.RelayedError
	switch {
	case t != nil:
		return here()
	case !found && err == nil:
		return "", forward.ErrThreadGone
	case errors.As(err, &re):
		return s.bridgeAddress(ctx, re.Holder), nil
	case err != nil:
		s.log.Warn("forwarded client: resume the thread", "thread", id, "err", err)
	}
	return "", nil
}
