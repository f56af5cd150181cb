// Package wsrelay forwards a client's WebSocket to another bridge on the
// same store (docs/store.md, "Forwarding"): it finds where that bridge said
// it is reached (store.Bridge), dials its /v1/ws with the client's
// credential and the client's hello, and copies every message both ways
// until either side ends, passing close codes on.
//
// The server decides whom to forward (a thread another bridge leases) and
// answers a client it cannot forward; this package only dials and copies.
// Splice blocks until both copies end and owns the one goroutine it starts.
// It imports only the store (the bridges' addresses) and wire.
package wsrelay

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

// Dial opens the WebSocket to the relay at addr (http:// or https://)
// with the client's credential (the Authorization header of h) and sends
// it the client's hello. It blocks at most DialTimeout.
func Dial(ctx context.Context, addr string, h http.Header, hello wire.Envelope) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
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

// Splice copies every message from a to b and from b to a until either
// side ends, or ctx does (then both are closed); a close frame is passed
// on with its code (an abnormal end as 1001, going away). It returns when
// both copies have, with both connections closed. The caller must not
// read or write a or b meanwhile; closing either ends the splice.
func Splice(ctx context.Context, a, b *websocket.Conn) {
	stop := context.AfterFunc(ctx, func() {
		a.Close()
		b.Close()
	})
	defer stop()
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
