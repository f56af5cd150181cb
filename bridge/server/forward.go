package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

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

// forwardDialTimeout bounds dialling the relay and its handshake.
const forwardDialTimeout = 10 * time.Second

// relayedError is a refusal of a thread another bridge relays: the
// client's error (a wire.Error), and that bridge's id.
type relayedError struct {
	holder string
	werr   wire.Error
}

func (e relayedError) Error() string { return e.werr.Error() }
func (e relayedError) Unwrap() error { return e.werr }

// announce tells the other bridges on the store where they reach this one:
// Config.AdvertiseURL, else listening (the address Run serves on) when it
// names a host (not 0.0.0.0 or ::). Run calls it once it listens.
func (s *Server) announce(listening string) {
	addr := s.cfg.AdvertiseURL
	if addr == "" {
		if host := hostOf(listening); host == "" || net.ParseIP(host).IsUnspecified() {
			s.log.Info("not announced to other bridges: set --advertise-url", "listening", listening)
			return
		}
		addr = listening
	}
	ctx, cancel := context.WithTimeout(s.ctx, readyTimeout)
	defer cancel()
	if err := s.db.PutBridge(ctx, store.Bridge{ID: s.cfg.BridgeID, Address: addr}); err != nil {
		s.log.Error("announce this bridge to the others", "err", err)
		return
	}
	s.leases.announced(addr)
}

func hostOf(rawURL string) string {
	rest := rawURL[strings.Index(rawURL, "://")+3:]
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		return ""
	}
	return host
}

// forward serves conn, whose hello (helloEnv) named a thread another
// bridge relays (err a relayedError), by forwarding it to that bridge. It
// reports false, having done nothing, when err is another error or the
// relay has no announced address; then the caller refuses the client.
func (s *Server) forward(r *http.Request, conn *websocket.Conn, helloEnv wire.Envelope, err error) bool {
	var re relayedError
	if !errors.As(err, &re) {
		return false
	}
	addr := s.bridgeAddress(r.Context(), re.holder)
	if addr == "" {
		return false
	}
	log := s.log.With("thread", helloEnv.Thread, "relay", re.holder, "remote", r.RemoteAddr)
	up, err := dialRelay(r.Context(), addr, r.Header, helloEnv)
	if err != nil {
		log.Warn("forward a client to the thread's relay", "err", err)
		reject(conn, wire.ErrorEnvelope(helloEnv.Thread, helloEnv.ID, wire.CodeSandboxUnavailable,
			"thread %s is relayed by bridge %s, which this bridge cannot reach: %v", helloEnv.Thread, re.holder, err), closeNormal)
		return true
	}
	log.Info("client forwarded to the thread's relay")
	stop := context.AfterFunc(s.ctx, func() { // the bridge shuts down: end both
		conn.Close()
		up.Close()
	})
	defer stop()
	splice(conn, up)
	log.Info("forwarded client detached")
	return true
}

// bridgeAddress is the announced address of bridge id, "" when none.
func (s *Server) bridgeAddress(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	bs, err := s.db.Bridges(ctx)
	if err != nil {
		s.log.Warn("list the bridges", "err", err)
		return ""
	}
	for _, b := range bs {
		if b.ID == id {
			return b.Address
		}
	}
	return ""
}

// dialRelay opens the WebSocket to the relay at addr with the client's
// credential and sends it the client's hello.
func dialRelay(ctx context.Context, addr string, h http.Header, hello wire.Envelope) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	defer cancel()
	u := strings.Replace(strings.Replace(addr, "https://", "wss://", 1), "http://", "ws://", 1) + wire.Path
	fwd := http.Header{}
	if a := h.Get("Authorization"); a != "" {
		fwd.Set("Authorization", a)
	}
	up, resp, err := websocket.DefaultDialer.DialContext(ctx, u, fwd)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (%s)", u, err, resp.Status)
		}
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	data, err := json.Marshal(hello)
	if err == nil {
		err = up.WriteMessage(websocket.TextMessage, data)
	}
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("send hello to %s: %w", u, err)
	}
	return up, nil
}

// splice copies every message from a to b and from b to a until either
// side ends; a close frame is passed on with its code. It returns when
// both copies have, with both connections closed.
func splice(a, b *websocket.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(b, a)
	}()
	pipe(a, b)
	wg.Wait()
}

// pipe copies src's messages to dst (dst's only writer) until src ends,
// then passes the close on and closes both.
func pipe(dst, src *websocket.Conn) {
	defer dst.Close()
	defer src.Close()
	for {
		typ, r, err := src.NextReader()
		if err != nil {
			code, text := websocket.CloseGoingAway, "the other side went away"
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				code, text = ce.Code, ce.Text
			}
			if code == websocket.CloseNoStatusReceived || code == websocket.CloseAbnormalClosure {
				code = websocket.CloseGoingAway
			}
			_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
			return
		}
		w, err := dst.NextWriter(typ)
		if err != nil {
			return
		}
		if _, err := io.Copy(w, r); err != nil {
			return
		}
		if err := w.Close(); err != nil {
			return
		}
	}
}
