package chat

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// DialWebSocket connects to cfg.URL and exchanges hellos; Dial uses it,
// and it hands the bare WebSocket to callers that must drive the socket
// themselves (tests that misbehave on purpose; binary frames need not:
// see Config.Receiver). cfg.Receiver is not used. It blocks until the
// server's hello or ctx's end; ctx bounds only the handshake. The caller
// owns the socket (one reader, one writer) and must close it; the returned
// hello has Thread filled in. When cfg.Thread is empty and cfg.Create is
// set, it first creates the thread with CreateThread.
func DialWebSocket(ctx context.Context, cfg Config) (*websocket.Conn, wire.Hello, error) {
	if cfg.Thread == "" && cfg.Create != nil {
		info, err := CreateThread(ctx, cfg, *cfg.Create)
		if err != nil {
			return nil, wire.Hello{}, fmt.Errorf("dial: %w", err)
		}
		cfg.Thread = info.ID
	}
	ep, err := resolve(cfg)
	if err != nil {
		return nil, wire.Hello{}, fmt.Errorf("dial: %w", err)
	}
	d, header := ep.wsDialer(), authHeader(cfg.Token) // forward.go
	ws, resp, err := d.DialContext(ctx, ep.ws.String(), header)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			return nil, wire.Hello{}, fmt.Errorf("dial %s: %w", ep.ws.Redacted(), newHTTPError(resp))
		}
		if ctx.Err() != nil { // ctx ended during the upgrade: say so, as the handshake does
			return nil, wire.Hello{}, fmt.Errorf("dial %s: %w (%v)", ep.ws.Redacted(), ctx.Err(), err)
		}
		return nil, wire.Hello{}, fmt.Errorf("dial %s: %w", ep.ws.Redacted(), err)
	}
	ws.SetReadLimit(wire.MaxMessageBytes)
	hello, err := handshake(ctx, ws, cfg)
	if err != nil {
		ws.Close()
		return nil, wire.Hello{}, fmt.Errorf("dial %s: hello: %w", ep.ws.Redacted(), err)
	}
	return ws, hello, nil
}
