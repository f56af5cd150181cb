package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Deadlines and sizes of WebSocket connections (clients and agents).
const (
	// writeWait bounds writing one frame.
	writeWait = 10 * time.Second
	// pongWait is how long a peer may stay silent; pings keep it talking.
	pongWait = 60 * time.Second
	// pingPeriod is how often the writer pings; shorter than pongWait.
	pingPeriod = pongWait * 9 / 10
	// helloTimeout bounds waiting for a peer's hello.
	helloTimeout = 10 * time.Second
	// clientSendBuffer is how many replies (messages without seq) may
	// wait for a slow client before it is dropped. Events are not queued:
	// the writer reads them by cursor from the thread's tail or the store.
	clientSendBuffer = 256
)

// Close codes sent to clients.
const (
	closeNormal    = websocket.CloseNormalClosure
	closeGoingAway = websocket.CloseGoingAway
	// closeTooSlow drops a client that does not take its replies: it may
	// reconnect with after_seq and catch up from the log. (A client slow to
	// take events only falls behind: its writer reads them from the log.)
	closeTooSlow = websocket.CloseTryAgainLater
)

// client is one attached client connection. Its handler goroutine reads; its
// writer goroutine (writePump) is the only one that writes to conn, and it
// closes conn when it returns.
type client struct {
	id   string
	conn *websocket.Conn
	log  *slog.Logger
	send *wire.Queue[wire.Envelope] // replies; its room grows with use (wire.Queue)
	// ctx carries who the client authenticated as (users.go); it ends
	// when the connection's handler returns.
	ctx context.Context

	stop      chan struct{} // closed once by kick
	once      sync.Once
	closeCode int
	closeText string
	final     *wire.Envelope // written just before the close frame, if set

	wake   chan struct{} // signalled when the thread has new events (cap 1)
	cursor uint64        // seq of the last event written; writer only

	termQueue // terminal frames and control messages (terminal.go)
}

func newClient(id string, conn *websocket.Conn, log *slog.Logger) *client {
	return &client{
		id: id, conn: conn, log: log, ctx: context.Background(),
		send: wire.NewQueue[wire.Envelope](clientSendBuffer, 0),
		stop: make(chan struct{}),
		wake: make(chan struct{}, 1),

		termQueue: newTermQueue(),
	}
}

// enqueue queues env for the writer without blocking; a client whose queue
// is full is dropped. It is safe for concurrent use.
func (c *client) enqueue(env wire.Envelope) {
	if !c.send.Send(env) {
		c.log.Warn("dropping slow client", "queued", c.send.Len())
		c.kick(closeTooSlow, "client too slow: reconnect with after_seq", nil)
	}
}

// kick asks the writer to send final (if any) and a close frame, then close
// the connection. Only the first call counts; it does not block.
func (c *client) kick(code int, text string, final *wire.Envelope) {
	c.once.Do(func() {
		c.closeCode, c.closeText, c.final = code, text, final
		close(c.stop)
		c.term.Wake() // a fan-out waiting for room finds c gone (terminal.go)
	})
}

// wakeUp tells the writer there are new events, without blocking.
func (c *client) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// greeting is what writePump sends first (ws.go: helloAnswer).
type greeting struct {
	hello    wire.Envelope
	then     *wire.Envelope // sent right after hello, before any event, if set
	afterSeq uint64         // the events that follow come after this seq
}

// writePump writes the greeting, then t's events after its afterSeq by
// cursor — from the thread's tail or the store, a batch at a time, so a
// client that is behind never holds memory — interleaved with replies,
// terminal frames and pings, until kicked or a write fails. It closes the
// connection when it returns.
func (c *client) writePump(t *thread, g greeting) {
	defer c.conn.Close()
	w := c.w()
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	for _, env := range []*wire.Envelope{&g.hello, g.then} {
		if env == nil {
			continue
		}
		if err := w.JSON(*env); err != nil {
			c.log.Debug("write to client", "err", err)
			return
		}
	}
	c.cursor = g.afterSeq
	for {
		wake := c.wake
		if c.cursor < t.committedSeq() {
			if err := c.writeEvents(t); err != nil {
				c.log.Debug("write to client", "err", err)
				return
			}
			wake = closedWake // more may be waiting: only peek at the rest
		}
		select {
		case <-wake:
		case <-c.send.Ready():
			it, ok := c.send.TryNext()
			if !ok {
				continue
			}
			c.send.Release(it)
			if err := w.JSON(*it.Msg); err != nil {
				c.log.Debug("write to client", "err", err)
				return
			}
		case <-c.term.Ready():
			out, ok := c.term.TryNext()
			if !ok {
				continue
			}
			if err := c.writeTerm(out); err != nil {
				c.log.Debug("write terminal to client", "err", err)
				return
			}
		case <-ticker.C:
			if err := w.Ping(); err != nil {
				c.log.Debug("ping client", "err", err)
				return
			}
		case <-c.stop:
			if c.final != nil && (c.final.Seq == 0 || c.final.Seq > c.cursor) {
				_ = w.JSON(*c.final)
			}
			_ = w.Close(c.closeCode, c.closeText)
			return
		}
	}
}

// w is the writer of c's connection; only writePump writes.
func (c *client) w() wire.Writer { return wire.Writer{Conn: c.conn, Wait: writeWait} }

// closedWake is always ready: the writer selects on it to take other work
// between batches of events without waiting.
var closedWake = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// writeEvents writes the next batch of events after the cursor.
func (c *client) writeEvents(t *thread) error {
	for _, env := range t.eventsAfter(c.cursor) {
		if env.Seq <= c.cursor {
			continue
		}
		if err := c.w().JSON(env); err != nil {
			return err
		}
		c.cursor = env.Seq
	}
	return nil
}

// readPump reads the client's frames and hands requests to t until the
// connection fails or is closed. Malformed frames are answered to the client
// and the connection stays.
func (c *client) readPump(t *thread) {
	_ = c.conn.SetReadDeadline(time.Now().Add(pongWait))
	c.conn.SetPongHandler(func(string) error {
		return c.conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	c.conn.SetReadLimit(hardFrameBytes) // above it: close 1009, see security.go
	for {
		mt, r, err := c.conn.NextReader()
		if err != nil {
			c.log.Debug("client connection ended", "err", err)
			return
		}
		if mt == websocket.BinaryMessage { // terminal input (terminal.go)
			t.terminalInput(c, r)
			continue
		}
		env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
		var werr wire.Error
		switch {
		case errors.Is(err, wire.ErrTooLarge):
			c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeTooLarge,
				"message over %d bytes discarded", wire.MaxMessageBytes))
		case errors.As(err, &werr):
			c.enqueue(wire.ErrorEnvelope(t.id, "", werr.Code, "%s", werr.Message))
		case err != nil:
			c.log.Debug("read from client", "err", err)
			return
		default:
			t.request(c, env)
		}
	}
}

// writeEnvelope writes one frame with the write deadline.
func writeEnvelope(conn *websocket.Conn, env wire.Envelope) error {
	return wire.Writer{Conn: conn, Wait: writeWait}.JSON(env)
}

// reject answers a connection that will not be attached with env and a
// close frame, then closes it. Only for connections without a writer.
func reject(conn *websocket.Conn, env wire.Envelope, code int) {
	_ = writeEnvelope(conn, env)
	msg := websocket.FormatCloseMessage(code, "")
	_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
	conn.Close()
}
