package term

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

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
	conn     *chat.Conn
	log      *slog.Logger
	h        Handler
	idPrefix string
	nextID   atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan wire.Envelope // request id -> waiter
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
	var b [6]byte
	_, _ = rand.Read(b[:])
	c := &Conn{
		log: log, h: h, idPrefix: hex.EncodeToString(b[:]),
		pending: make(map[string]chan wire.Envelope),
	}
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

func (c *Conn) newID(kind string) string {
	return kind + "-" + c.idPrefix + "-" + strconv.FormatUint(c.nextID.Add(1), 10)
}

// sendJSON writes one control message.
func (c *Conn) sendJSON(ctx context.Context, env wire.Envelope) error {
	env.Thread = c.conn.Thread()
	return c.conn.Send(ctx, env)
}

// receiver is the chat.Receiver of a Conn: output frames and messages go
// to the Handler, then replies wake the request waiting for them.
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
	if env.ID != "" && env.Seq == 0 {
		r.c.mu.Lock()
		waiter := r.c.pending[env.ID]
		delete(r.c.pending, env.ID)
		r.c.mu.Unlock()
		if waiter != nil {
			waiter <- env // capacity 1, one reply per id
		}
	}
	return true // nothing reads Events
}

// request sends a control message with a fresh id and waits for the
// message answering it (same id); an error answer is returned as a
// wire.Error.
func (c *Conn) request(ctx context.Context, typ wire.Type, payload any) (wire.Envelope, error) {
	id := c.newID("t")
	env, err := wire.New(typ, "", id, payload)
	if err != nil {
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, err)
	}
	waiter := make(chan wire.Envelope, 1)
	c.mu.Lock()
	c.pending[id] = waiter
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.sendJSON(ctx, env); err != nil {
		return wire.Envelope{}, err
	}
	select {
	case reply := <-waiter:
		if reply.Type == wire.TypeError {
			var werr wire.Error
			if err := reply.Decode(&werr); err != nil {
				return reply, fmt.Errorf("%s: %w", typ, err)
			}
			return reply, fmt.Errorf("%s: %w", typ, werr)
		}
		return reply, nil
	case <-c.conn.Done():
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, c.endErr())
	case <-ctx.Done():
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, ctx.Err())
	}
}

// endErr is the error calls return once the connection has ended.
func (c *Conn) endErr() error {
	if err := c.conn.Err(); err != nil {
		return err
	}
	return ErrClosed
}
