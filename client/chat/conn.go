package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// Software is what the client calls itself in hello.
const Software = "boxwire-client/0.1.0"

// Deadlines and sizes of a connection.
const (
	// writeWait bounds one frame write.
	writeWait = 10 * time.Second
	// pongWait is how long the connection may stay silent (not even a
	// WebSocket pong) before it is considered dead.
	pongWait = 60 * time.Second
	// pingPeriod is how often the writer sends WebSocket pings; < pongWait.
	pingPeriod = pongWait * 9 / 10
	// closeGrace is how long Close waits for the server's close frame.
	closeGrace = time.Second
	// handshakeTimeout bounds the HTTP upgrade (not the wait for hello,
	// which ctx bounds: a bridge may start a sandbox first).
	handshakeTimeout = 30 * time.Second
	// outboxSize is how many frames may wait for the writer.
	outboxSize = 64
)

// Conn is one WebSocket connection bound to one thread. Its methods are
// safe for concurrent use, except that Events has a single consumer:
// whoever reads Events (directly or through Run) must be the only one.
type Conn struct {
	ws       *websocket.Conn
	log      *slog.Logger
	thread   string
	server   wire.Hello
	idPrefix string
	nextID   atomic.Uint64
	lastSeq  atomic.Uint64
	rcv      Receiver // Config.Receiver, nil for none

	events    chan wire.Envelope // closed by the reader
	outbox    chan outgoing      // read by the writer only
	quit      chan struct{}      // closed by Close
	closeOnce sync.Once
	readDone  chan struct{} // closed when the reader has returned
	writeDone chan struct{} // closed when the writer has returned

	mu      sync.Mutex
	err     error                         // why the connection ended; first cause wins
	pending map[string]chan wire.Envelope // Request id -> waiter (capacity 1), guarded by mu
}

// outgoing is one frame for the writer; done receives the write's result.
type outgoing struct {
	kind int // websocket.TextMessage or websocket.BinaryMessage
	data []byte
	done chan error // buffered, capacity 1
}

// Dial connects to cfg.URL, sends hello and waits for the server's hello.
// It blocks until then or until ctx ends; ctx bounds only the dial and the
// handshake, not the connection's life. An HTTP 401 is an error for which
// errors.Is(err, ErrUnauthorized) holds; an error message instead of hello
// unwraps to its wire.Error (errors.As gives the code). The caller must
// Close the returned Conn.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	ws, hello, err := DialWebSocket(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := newConn(ws, cfg, hello)
	c.log.Debug("connected", "server", hello.Software)
	go c.readPump()
	go c.writePump()
	return c, nil
}

func newConn(ws *websocket.Conn, cfg Config, hello wire.Hello) *Conn {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	size := cfg.EventBuffer
	if size <= 0 {
		size = defaultEventBuffer
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	c := &Conn{
		ws:        ws,
		log:       log.With("thread", hello.Thread),
		thread:    hello.Thread,
		server:    hello,
		idPrefix:  hex.EncodeToString(b[:]),
		events:    make(chan wire.Envelope, size),
		outbox:    make(chan outgoing, outboxSize),
		quit:      make(chan struct{}),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
		pending:   make(map[string]chan wire.Envelope),
		rcv:       cfg.Receiver,
	}
	c.lastSeq.Store(cfg.AfterSeq)
	return c
}

// handshake sends the client hello and reads the server's answer, bounded
// by ctx. It returns the server's hello with Thread filled in.
func handshake(ctx context.Context, ws *websocket.Conn, cfg Config) (wire.Hello, error) {
	// ctx ends the exchange through the AfterFunc below; the socket
	// deadline, a little later, is only a backstop.
	if deadline, ok := ctx.Deadline(); ok {
		_ = ws.SetWriteDeadline(deadline.Add(time.Second))
		_ = ws.SetReadDeadline(deadline.Add(time.Second))
	}
	stop := context.AfterFunc(ctx, func() { _ = ws.NetConn().SetDeadline(time.Unix(1, 0)) })
	defer stop()

	hello := wire.MustNew(wire.TypeHello, "", "", wire.Hello{
		Version: wire.Version, Role: wire.RoleClient, Software: Software,
		Thread: cfg.Thread, AfterSeq: cfg.AfterSeq,
	})
	env, err := exchange(ws, hello)
	if !stop() || (err != nil && ctx.Err() != nil) {
		return wire.Hello{}, ctx.Err()
	}
	if err != nil {
		return wire.Hello{}, err
	}
	_ = ws.SetReadDeadline(time.Time{})
	_ = ws.SetWriteDeadline(time.Time{})
	switch env.Type {
	case wire.TypeHello:
	case wire.TypeError:
		var werr wire.Error
		if err := env.Decode(&werr); err != nil {
			return wire.Hello{}, err
		}
		return wire.Hello{}, werr
	default:
		return wire.Hello{}, fmt.Errorf("server sent %q before hello", env.Type)
	}
	var h wire.Hello
	if err := env.Decode(&h); err != nil {
		return wire.Hello{}, err
	}
	if h.Version != wire.Version {
		return wire.Hello{}, fmt.Errorf("server speaks protocol version %d, want %d", h.Version, wire.Version)
	}
	for _, t := range []string{h.Thread, env.Thread, cfg.Thread} {
		if h.Thread == "" {
			h.Thread = t
		}
	}
	return h, nil
}

// exchange writes one envelope and reads the next frame.
func exchange(ws *websocket.Conn, env wire.Envelope) (wire.Envelope, error) {
	if err := ws.WriteJSON(env); err != nil {
		return wire.Envelope{}, fmt.Errorf("write: %w", err)
	}
	_, data, err := ws.ReadMessage()
	if err != nil {
		return wire.Envelope{}, fmt.Errorf("read: %w", err)
	}
	return wire.Parse(data)
}

// Thread is the thread this connection is bound to, as the server said.
func (c *Conn) Thread() string { return c.thread }

// Server is the hello the server answered with.
func (c *Conn) Server() wire.Hello { return c.server }

// Done is closed when the connection has ended (Err then says why),
// before Events is closed.
func (c *Conn) Done() <-chan struct{} { return c.readDone }

// Events delivers every message from the server except pong — events and
// errors — in the order they arrived. It is closed when the connection
// ends; Err then says why. It has a single consumer (see Conn).
func (c *Conn) Events() <-chan wire.Envelope { return c.events }

// LastSeq is the seq of the last event delivered on Events (Config.AfterSeq
// before any). Dial with AfterSeq set to it to resume without gaps.
func (c *Conn) LastSeq() uint64 { return c.lastSeq.Load() }

// Err says why the connection ended: nil while it is open, ErrClosed after
// Close, ErrSlowConsumer, or the read or write error that ended it (a
// *websocket.CloseError when the server closed it).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail records why the connection ended; the first cause wins.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// endErr is the error calls return once the connection has ended.
func (c *Conn) endErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close ends the connection: it sends a close frame, waits briefly for the
// server's, closes the socket and waits for the reader and the writer to
// return (at most a few seconds). Events is closed by then. It is
// idempotent and safe for concurrent use; it always returns nil.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(ErrClosed)
		close(c.quit)
	})
	<-c.readDone
	<-c.writeDone
	return nil
}

// NewID returns a request id starting with kind, unique to this
// connection and, with its random part, very likely across all clients of
// a thread. Safe for concurrent use.
func (c *Conn) NewID(kind string) string {
	return kind + "-" + c.idPrefix + "-" + strconv.FormatUint(c.nextID.Add(1), 10)
}

// Send queues env for the writer and waits until it has been written, the
// connection ends, or ctx ends (the frame may then still be written). It
// is safe for concurrent use; frames are written one at a time.
func (c *Conn) Send(ctx context.Context, env wire.Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("send %s: %w", env.Type, err)
	}
	if err := c.send(ctx, websocket.TextMessage, data); err != nil {
		return fmt.Errorf("send %s: %w", env.Type, err)
	}
	return nil
}

// SendBinary queues data as one binary frame (a terminal frame,
// wire.AppendFrame) and waits like Send. It is safe for concurrent use.
func (c *Conn) SendBinary(ctx context.Context, data []byte) error {
	if err := c.send(ctx, websocket.BinaryMessage, data); err != nil {
		return fmt.Errorf("send binary frame: %w", err)
	}
	return nil
}

// send queues one frame of kind and waits until it is written, the
// connection ends, or ctx ends.
func (c *Conn) send(ctx context.Context, kind int, data []byte) error {
	if len(data) > wire.MaxMessageBytes {
		return fmt.Errorf("%d bytes: %w", len(data), wire.ErrTooLarge)
	}
	select {
	case <-c.readDone: // the connection is ending
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
