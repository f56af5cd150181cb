// Package wsrelay dials another bridge on the same store for a forwarded
// client (docs/store.md, "Forwarding"): it finds where that bridge said it
// is reached (store.Bridge) and dials its /v1/ws with the client's
// credential and the client's hello.
//
// The server decides whom to forward (a thread another bridge leases),
// serves the forwarded client and reads the connection Dial returns; this
// package only finds and dials. It starts no goroutines and imports only
// the store (the bridges' addresses) and wire.
package wsrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DialTimeout bounds dialling the relay and its handshake.
const DialTimeout = 10 * time.Second

// Advertised is the address this bridge announces to the others:
// advertise (--advertise-url) when set, else listening (the address the
// bridge serves on) when it names a host (not 0.0.0.0 or ::), else "".
func Advertised(advertise, listening string) string {
	if advertise != "" {
		return advertise
	}
	if host := hostOf(listening); host == "" || net.ParseIP(host).IsUnspecified() {
		return ""
	}
	return listening
}

// hostOf is the host of a scheme://host:port address, "" when it has none.
func hostOf(rawURL string) string {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ""
	}
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		return ""
	}
	return host
}

// Bridges lists the bridges on the store and where each is reached
// (store.Backend implements it).
type Bridges interface {
	Bridges(ctx context.Context) ([]store.Bridge, error)
}

// Address is the announced address of bridge id, "" when it announced
// none.
func Address(ctx context.Context, bs Bridges, id string) (string, error) {
	all, err := bs.Bridges(ctx)
	if err != nil {
		return "", fmt.Errorf("list the bridges: %w", err)
	}
	for _, b := range all {
		if b.ID == id {
			return b.Address, nil
		}
	}
	return "", nil
}

// RefusedError is Dial's error when the relay answered the upgrade with
// an HTTP status instead (401: the credential is refused, 403: not
// allowed, 503: shutting down).
type RefusedError struct {
	URL    string
	Status int
	Err    error
}

func (e *RefusedError) Error() string { return "dial " + e.URL + ": " + e.Err.Error() }

// Unwrap returns the handshake's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// Dial opens the WebSocket to the relay at addr (http:// or https://)
// with the client's credential (the Authorization or Cookie header of h) and sends
// it the client's hello. It blocks at most DialTimeout.
func Dial(ctx context.Context, addr string, h http.Header, hello wire.Envelope) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	u := strings.Replace(strings.Replace(addr, "https://", "wss://", 1), "http://", "ws://", 1) + wire.Path
	fwd := http.Header{}
	for _, k := range []string{"Authorization", "Cookie"} {
		if a := h.Get(k); a != "" {
			fwd.Set(k, a)
		}
	}
	up, resp, err := websocket.DefaultDialer.DialContext(ctx, u, fwd)
	if err != nil {
		if resp != nil {
			return nil, &RefusedError{URL: u, Status: resp.StatusCode, Err: fmt.Errorf("%w (%s)", err, resp.Status)}
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
