package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultURL is where Dial connects when Config.URL is empty: a bridge on
// its default local port.
const DefaultURL = "ws://127.0.0.1:7420" + wire.Path

// defaultEventBuffer is Config.EventBuffer's default.
const defaultEventBuffer = 4096

// Config says where and how to connect. The zero value connects to
// DefaultURL without a token and creates a new thread.
type Config struct {
	// URL is the WebSocket endpoint: ws://host:port/v1/ws (wss:// for TLS).
	// http:// and https:// map to ws:// and wss://; a URL without a path and
	// a bare host:port get /v1/ws. unix:/path/to/socket connects to a unix
	// socket (unless NetDialContext is set, which then wins).
	URL string
	// Token is sent as "Authorization: Bearer <token>" when not empty. It is
	// never logged.
	Token string
	// Thread is the thread to attach to; empty asks for a new one.
	Thread string
	// Create, when set and Thread is empty, gives the new thread's
	// settings (image, runtime, scope, ttl, egress, policy): Dial creates
	// it through the bridge's HTTP API (CreateThread) and then attaches.
	// A standalone agent has no such API; leave it nil there.
	Create *wire.CreateThread
	// AfterSeq is the last event seq already seen; the server replays every
	// later event it still has after its hello.
	AfterSeq uint64
	// NetDialContext, when set, opens the network connection, e.g. to reach
	// a unix socket. The URL's host is then only a label.
	NetDialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// EventBuffer is how many events may wait unread on Events before the
	// connection is dropped with ErrSlowConsumer; 0 means 4096.
	EventBuffer int
	// Receiver, when set, sees the connection's traffic first, on its
	// reader goroutine: every binary frame (terminal bytes, which Events
	// never carries) and every JSON message but pong, in arrival order.
	// A message it consumes does not go on to Events. See Receiver.
	Receiver Receiver
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer; it never shows the token.
func (c Config) LogValue() slog.Value {
	token := ""
	if c.Token != "" {
		token = "[redacted]"
	}
	return slog.GroupValue(
		slog.String("url", c.URL),
		slog.String("token", token),
		slog.String("thread", c.Thread),
		slog.Uint64("after_seq", c.AfterSeq),
	)
}

// endpoint is a resolved Config.URL.
type endpoint struct {
	ws   *url.URL // ws:// or wss:// URL of the WebSocket
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// resolve turns cfg.URL into a WebSocket URL and a dial function.
func resolve(cfg Config) (endpoint, error) {
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" {
		raw = DefaultURL
	}
	ep := endpoint{dial: cfg.NetDialContext}
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return endpoint{}, fmt.Errorf("url %q: missing socket path", raw)
		}
		if ep.dial == nil {
			ep.dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			}
		}
		raw = "ws://unix" + wire.Path
	}
	if !strings.Contains(raw, "://") {
		raw = "ws://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("parse url: %w", err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return endpoint{}, fmt.Errorf("url %q: scheme %q is not ws, wss, http, https or unix", raw, u.Scheme)
	}
	if u.Host == "" {
		return endpoint{}, fmt.Errorf("url %q: missing host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = wire.Path
	}
	ep.ws = u
	return ep, nil
}

// httpBase is the http(s) URL of the server root for the HTTP API.
func (ep endpoint) httpBase() *url.URL {
	u := *ep.ws
	u.Scheme = "http"
	if ep.ws.Scheme == "wss" {
		u.Scheme = "https"
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = "", "", "", ""
	return &u
}

// Errors a Conn or DeleteThread may return; test with errors.Is.
var (
	// ErrUnauthorized means the server answered HTTP 401: the token is
	// missing or wrong.
	ErrUnauthorized = errors.New("unauthorized: missing or wrong token")
	// ErrClosed is Err's value after Close, and what calls on a closed Conn
	// return.
	ErrClosed = errors.New("connection closed")
	// ErrSlowConsumer ends a connection whose Events were not read fast
	// enough; see Config.EventBuffer.
	ErrSlowConsumer = errors.New("events not read fast enough")
)
