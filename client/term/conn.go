package term

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// ErrClosed is what calls on a closed Conn return, and Err after Close:
// chat.ErrClosed.
var ErrClosed = chat.ErrClosed

// Handler receives a connection's traffic in the order it arrived, on the
// connection's reader goroutine: output bytes of every session this
// connection watches, and every JSON message (replies to requests, too,
// before the request's caller gets them). It must not block for long — it
// paces the session's output — and must not wait for a reply from the same
// Conn. A panic in it ends the connection (Err says so) instead of the
// process. Data is only valid during the call.
type Handler interface {
	Output(session string, data []byte)
	Message(env wire.Envelope)
}

// Conn is one WebSocket connection to a thread (or a standalone agent)
// used for terminal sessions: a chat.Conn whose Receiver (this Conn)
// takes every frame. Its methods are safe for concurrent use. The
// chat.Conn owns one reader and one writer goroutine; Close stops and
// waits for them.
type Conn struct {
	conn *chat.Conn
	log  *slog.Logger
	h    Handler
}

// Dial connects like chat.Dial (same Config: URL, token, thread; its
// Receiver is replaced) and starts the connection's reader and writer. It
// blocks until the server's hello or ctx's end; ctx bounds only the
// handshake. h may be nil (output is then discarded). The caller must
// Close the Conn.
func Dial(ctx context.Context, cfg chat.Config, h Handler) (*Conn, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if h == nil {
		h = discard{}
	}
	c := &Conn{log: log, h: h}
	cfg.Receiver = receiver{c} // the reader calls it; it never touches c.conn
	conn, err := chat.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

type discard struct{}

func (discard) Output(string, []byte) {}
func (discard) Message(wire.Envelope) {}

// Thread is the thread the server bound this connection to.
func (c *Conn) Thread() string { return c.conn.Thread() }

// Done is closed when the connection has ended (Err says why).
func (c *Conn) Done() <-chan struct{} { return c.conn.Done() }

// Err says why the connection ended: nil while it is open, ErrClosed after
// Close, or the error that ended it.
func (c *Conn) Err() error { return c.conn.Err() }

// Close ends the connection: a close frame, a short wait for the server's,
// then the socket is closed and both goroutines are waited for. Sessions
// this connection watched go on running. Idempotent; always nil.
func (c *Conn) Close() error { return c.conn.Close() }

// sendJSON writes one control message.
func (c *Conn) sendJSON(ctx context.Context, env wire.Envelope) error {
	env.Thread = c.conn.Thread()
	return c.conn.Send(ctx, env)
}

// receiver is the chat.Receiver of a Conn: output frames and messages go
// to the Handler (replies too, before chat.Conn.Request hands them to the
// request waiting for them).
type receiver struct{ c *Conn }

func (r receiver) Binary(data []byte) {
	f, err := wire.ParseFrame(data)
	if err != nil || f.Kind != wire.FrameOutput {
		r.c.log.Warn("ignoring binary frame", "err", err)
		return
	}
	r.c.h.Output(f.Session, f.Data)
}

func (r receiver) Message(env wire.Envelope) bool {
	r.c.h.Message(env)
	return true // nothing reads Events
}

// request sends a control message with a fresh id and waits for the
// message answering it (chat.Conn.Request): an error answer is returned
// as a wire.Error.
func (c *Conn) request(ctx context.Context, typ wire.Type, payload any) (wire.Envelope, error) {
	env, err := wire.New(typ, "", c.conn.NewID("t"), payload)
	if err != nil {
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, err)
	}
	return c.conn.Request(ctx, env)
}
