package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// PortInfo is one port that listens in a thread's sandbox, as the
// bridge's GET /v1/threads/{id}/ports names it, with its preview URLs.
type PortInfo struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
	// URL is the path-form preview (on the bridge); HostURL the host
	// form, when the bridge has a preview domain; Public and PublicHost
	// the port's public link, when it has one.
	URL        string `json:"url"`
	HostURL    string `json:"host_url,omitempty"`
	Public     string `json:"public,omitempty"`
	PublicHost string `json:"public_host,omitempty"`
	// Open opens the host form in a browser logged in to the bridge.
	Open string `json:"open,omitempty"`
}

// Ports asks the bridge what listens in thread's sandbox. It blocks until
// the bridge (and the sandbox's agent) answered or ctx ends.
func Ports(ctx context.Context, cfg Config, thread string) ([]PortInfo, error) {
	ep, err := resolve(cfg)
	if err != nil {
		return nil, fmt.Errorf("ports of %s: %w", thread, err)
	}
	u := ep.httpBase()
	threadPath(u, thread, "/ports")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("ports of %s: %w", thread, err)
	}
	resp, err := ep.do(req, cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("ports of %s: %w", thread, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("ports of %s: %w", thread, newHTTPError(resp))
	}
	var body struct {
		Ports []PortInfo `json:"ports"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("ports of %s: %w", thread, err)
	}
	return body.Ports, nil
}

// DialPort connects to port on the loopback of thread's sandbox through
// the bridge (GET /v1/threads/{id}/forward/{port}, a WebSocket of the
// connection's bytes) and returns the connection. It blocks until the
// bridge reached the port or refused: an *HTTPError unwrapping to a
// wire.Error, code port_closed (502) when nothing listens there,
// not_found for a thread that is not the caller's. The connection has
// CloseWrite; the caller closes it.
func DialPort(ctx context.Context, cfg Config, thread string, port int) (net.Conn, error) {
	ep, err := resolve(cfg)
	if err != nil {
		return nil, fmt.Errorf("forward to %s port %d: %w", thread, port, err)
	}
	u := *ep.ws
	threadPath(&u, thread, "/forward/"+strconv.Itoa(port))
	d, header := ep.wsDialer(), authHeader(cfg.Token)
	ws, resp, err := d.DialContext(ctx, u.String(), header)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			return nil, fmt.Errorf("forward to %s port %d: %w", thread, port, newHTTPError(resp))
		}
		return nil, fmt.Errorf("forward to %s port %d: %w", thread, port, err)
	}
	ws.SetReadLimit(1 << 20)
	return &portConn{ws: ws, port: port}, nil
}

// wsDialer dials the endpoint's WebSockets: over its own dialer (a unix
// socket), else through the environment's proxy.
func (ep endpoint) wsDialer() *websocket.Dialer {
	d := &websocket.Dialer{NetDialContext: ep.dial, HandshakeTimeout: handshakeTimeout}
	if ep.dial == nil {
		d.Proxy = http.ProxyFromEnvironment
	}
	return d
}

// authHeader carries token as a bearer credential (none when empty).
func authHeader(token string) http.Header {
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	return header
}

// portConn is a forward's WebSocket as a net.Conn: binary messages each
// way, an empty one for the end of a direction. One reader and one writer
// at a time; Close from anywhere.
type portConn struct {
	ws   *websocket.Conn
	port int
	r    io.Reader // the message being read

	wmu       sync.Mutex
	closeOnce sync.Once
}

// Read reads the sandbox's bytes; io.EOF when it ended its direction.
func (c *portConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			mt, r, err := c.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					return 0, io.EOF
				}
				return 0, err
			}
			if mt != websocket.BinaryMessage {
				return 0, fmt.Errorf("forward: a message of type %d, not binary", mt)
			}
			n, err := r.Read(p)
			switch {
			case errors.Is(err, io.EOF) && n == 0: // an empty message: the end
				return 0, io.EOF
			case errors.Is(err, io.EOF):
				return n, nil
			case err != nil:
				return n, err
			}
			c.r = r
			if n > 0 {
				return n, nil
			}
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r, err = nil, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// Write sends p in messages of at most wire.LargeStreamData bytes (a
// bridge takes up to 1 MiB).
func (c *portConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for written < len(p) {
		n := min(len(p)-written, wire.LargeStreamData)
		if err := c.ws.WriteMessage(websocket.BinaryMessage, p[written:written+n]); err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// CloseWrite ends the direction towards the sandbox.
func (c *portConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.BinaryMessage, nil)
}

// Close ends the forward.
func (c *portConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	})
	return c.ws.Close()
}

func (c *portConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *portConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *portConn) SetDeadline(t time.Time) error      { return c.ws.NetConn().SetDeadline(t) }
func (c *portConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *portConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
