package term

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Deadlines and sizes of a terminal connection.
const (
	writeWait  = 10 * time.Second
	pongWait   = 60 * time.Second
	pingPeriod = pongWait * 9 / 10
	closeGrace = time.Second
	outboxSize = 64
	// readLimit admits the largest binary frame and the largest JSON message.
	readLimit = wire.MaxMessageBytes
)

// ErrClosed is what calls on a closed Conn return, and Err after Close.
var ErrClosed = errors.New("terminal connection closed")

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
// used for terminal sessions. Its methods are safe for concurrent use. It
// owns one reader and one writer goroutine; Close stops and waits for them.
type Conn struct {
	ws       *websocket.Conn
	log      *slog.Logger
	thread   string
	h        Handler
	idPrefix string
	nextID   atomic.Uint64

	outbox    chan outgoing
	quit      chan struct{} // closed by Close
	closeOnce sync.Once
	readDone  chan struct{}
	writeDone chan struct{}

	mu      sync.Mutex
	err     error
	pending map[string]chan wire.Envelope // request id -> waiter
}

type outgoing struct {
	kind int // websocket.TextMessage or BinaryMessage
	data []byte
	done chan error // capacity 1
}

// Dial connects like chat.Dial (same Config: URL, token, thread) and starts
// the connection's reader and writer. It blocks until the server's hello
// or ctx's end; ctx bounds only the handshake. h may be nil (output is
// then discarded). The caller must Close the Conn.
func Dial(ctx context.Context, cfg chat.Config, h Handler) (*Conn, error) {
	ws, hello, err := chat.DialWebSocket(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(readLimit)
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
		ws: ws, log: log.With("thread", hello.Thread), thread: hello.Thread, h: h,
		idPrefix: hex.EncodeToString(b[:]),
		outbox:   make(chan outgoing, outboxSize),
		quit:     make(chan struct{}), readDone: make(chan struct{}), writeDone: make(chan struct{}),
		pending: make(map[string]chan wire.Envelope),
	}
	go c.readPump()
	go c.writePump()
	return c, nil
}

type discard struct{}

func (discard) Output(string, []byte) {}
func (discard) Message(wire.Envelope) {}

// Thread is the thread the server bound this connection to.
func (c *Conn) Thread() string { return c.thread }

// Done is closed when the connection has ended (Err says why).
func (c *Conn) Done() <-chan struct{} { return c.readDone }

// Err says why the connection ended: nil while it is open, ErrClosed after
// Close, or the error that ended it.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *Conn) endErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close ends the connection: a close frame, a short wait for the server's,
// then the socket is closed and both goroutines are waited for. Sessions
// this connection watched go on running. Idempotent; always nil.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(ErrClosed)
		close(c.quit)
	})
	<-c.readDone
	<-c.writeDone
	return nil
}

func (c *Conn) newID(kind string) string {
	return kind + "-" + c.idPrefix + "-" + strconv.FormatUint(c.nextID.Add(1), 10)
}

// send queues one frame and waits until it is written, the connection
// ends, or ctx ends.
func (c *Conn) send(ctx context.Context, kind int, data []byte) error {
	select {
	case <-c.readDone:
		return c.endErr()
	default:
	}
	out := outgoing{kind: kind, data: data, done: make(chan error, 1)}
	select {
	case c.outbox <- out:
	case <-c.writeDone:
		return c.endErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-out.done:
		return err
	case <-c.writeDone:
		select {
		case err := <-out.done:
			return err
		default:
			return c.endErr()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendJSON writes one control message.
func (c *Conn) sendJSON(ctx context.Context, env wire.Envelope) error {
	env.Thread = c.thread
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("send %s: %w", env.Type, err)
	}
	if err := c.send(ctx, websocket.TextMessage, data); err != nil {
		return fmt.Errorf("send %s: %w", env.Type, err)
	}
	return nil
}

// request sends a control message with a fresh id and waits for the
// message answering it (same id); an error answer is returned as a
// wire.Error.
func (c *Conn) request(ctx context.Context, typ wire.Type, payload any) (wire.Envelope, error) {
	id := c.newID("t")
	env, err := wire.New(typ, c.thread, id, payload)
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
	case <-c.readDone:
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, c.endErr())
	case <-ctx.Done():
		return wire.Envelope{}, fmt.Errorf("%s: %w", typ, ctx.Err())
	}
}
