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

// client is one attached client connection. Its handler goroutine reads;
// its writer (write, run by pump) is the only one that writes to conn, and
// it closes conn when it finishes. The writer runs on a goroutine only
// while there is something to write — a reply, a terminal item, events
// after its cursor, a ping, the close — so an idle connection has one
// goroutine, its reader (wire.Pump).
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

	// pump runs write whenever the thread has new events (wakeUp), a
	// queue gets an item, the ping ticks or the client is kicked.
	pump *wire.Pump
	// The writer's own: set by startWriter before the pump's first run,
	// then read and written only by the writer.
	thread  *thread
	greet   greeting
	greeted bool
	cursor  uint64 // seq of the last event written

	// tc is conn's socket when a reply can be written on the goroutine
	// that has it (reply, tryWrite; nil: TLS). try is tryWrite, made once.
	tc  *wire.TryConn
	try func() bool

	termQueue // terminal frames and control messages (terminal.go)
}

func newClient(id string, conn *websocket.Conn, log *slog.Logger) *client {
	c := &client{
		id: id, conn: conn, log: log, ctx: context.Background(),
		send: wire.NewQueue[wire.Envelope](clientSendBuffer, 0),
		stop: make(chan struct{}),

		termQueue: newTermQueue(),
	}
	c.pump = wire.NewPump(c.write, pingPeriod)
	c.send.OnPush(c.pump.Kick)
	c.term.OnPush(c.pump.Kick)
	c.tc = wire.TryConnOf(conn.NetConn())
	c.try = c.tryWrite
	return c
}

// enqueue queues env for the writer without blocking; a client whose queue
// is full is dropped. It is safe for concurrent use.
func (c *client) enqueue(env wire.Envelope) {
	if !c.send.Send(env) {
		c.dropSlow()
	}
}

// reply is enqueue for a reply from the agent, on the agent link's
// reader: when the writer is idle, the reply is written right there, as
// much of it as the socket takes at once (wire.Pump.TryKick), and a
// writer goroutine is woken only for the rest. The caller holds no lock.
func (c *client) reply(env wire.Envelope) {
	if !c.send.Put(env) {
		c.dropSlow()
		return
	}
	c.pump.TryKick(c.try)
}

// dropSlow drops a client whose reply queue is full.
func (c *client) dropSlow() {
	c.log.Warn("dropping slow client", "queued", c.send.Len())
	c.kick(closeTooSlow, "client too slow: reconnect with after_seq", nil)
}

// tryWrite is the writer's run on a producer's goroutine (wire.Pump.TryKick):
// it writes waiting replies without ever waiting for the socket, and
// reports whether the writer has more to do. It leaves everything else to
// the writer: the greeting, events the client has not had (they come
// before a reply that follows them), terminal frames, pings, the close.
func (c *client) tryWrite() (more bool) {
	if c.tc == nil || !c.greeted || c.cursor < c.thread.committedSeq() {
		return true
	}
	c.tc.Try(true)
	defer c.tc.Try(false)
	w := c.w()
	for !c.tc.Blocked() {
		it, ok := c.send.TryNext()
		if !ok {
			return false
		}
		c.send.Release(it)
		if err := w.JSON(*it.Msg); err != nil {
			return true // the writer's Flush meets the error and ends it
		}
	}
	return true
}

// kick asks the writer to send final (if any) and a close frame, then close
// the connection. Only the first call counts; it does not block.
func (c *client) kick(code int, text string, final *wire.Envelope) {
	c.once.Do(func() {
		c.closeCode, c.closeText, c.final = code, text, final
		close(c.stop)
		c.term.Wake() // a fan-out waiting for room finds c gone (terminal.go)
		c.pump.Kick()
	})
}

// wakeUp tells the writer there are new events, without blocking.
func (c *client) wakeUp() { c.pump.Kick() }

// greeting is what the writer sends first (ws.go: helloAnswer).
type greeting struct {
	hello    wire.Envelope
	then     *wire.Envelope // sent right after hello, before any event, if set
	afterSeq uint64         // the events that follow come after this seq
}

// startWriter starts c's writer for t: it writes the greeting, then t's
// events after its afterSeq by cursor — from the thread's tail or the
// store, a batch at a time, so a client that is behind never holds memory
// — interleaved with replies, terminal frames and pings, until kicked or a
// write fails; then it closes the connection and c.pump.Done() closes. It
// does not block; call it once.
func (c *client) startWriter(t *thread, g greeting) {
	c.thread, c.greet = t, g
	c.pump.Start()
}

// write is one run of the writer (wire.Pump): it writes what waits, one
// item of each kind in turn, until nothing does (false) or the
// connection is finished (true: kicked, or a write failed; conn closed).
func (c *client) write() (finished bool) {
	w := c.w()
	if c.tc != nil {
		if err := c.tc.Flush(writeWait); err != nil { // what a try left
			return c.failed("write to client", err)
		}
	}
	if !c.greeted {
		c.greeted = true
		for _, env := range []*wire.Envelope{&c.greet.hello, c.greet.then} {
			if env == nil {
				continue
			}
			if err := w.JSON(*env); err != nil {
				return c.failed("write to client", err)
			}
		}
		c.cursor = c.greet.afterSeq
	}
	for {
		select {
		case <-c.stop:
			if c.final != nil && (c.final.Seq == 0 || c.final.Seq > c.cursor) {
				_ = w.JSON(*c.final)
			}
			_ = w.Close(c.closeCode, c.closeText)
			c.conn.Close()
			return true
		default:
		}
		busy := false
		if c.cursor < c.thread.committedSeq() {
			if err := c.writeEvents(c.thread); err != nil { // one batch: then the rest gets a turn
				return c.failed("write to client", err)
			}
			busy = true
		}
		if it, ok := c.send.TryNext(); ok {
			c.send.Release(it)
			if err := w.JSON(*it.Msg); err != nil {
				return c.failed("write to client", err)
			}
			busy = true
		}
		if out, ok := c.term.TryNext(); ok {
			if err := c.writeTerm(out); err != nil {
				return c.failed("write terminal to client", err)
			}
			busy = true
		}
		if c.pump.Ticked() {
			if err := w.Ping(); err != nil {
				return c.failed("ping client", err)
			}
		}
		if !busy {
			return false
		}
	}
}

// failed ends the writer after a failed write: it closes the connection
// (the reader then ends too).
func (c *client) failed(what string, err error) (finished bool) {
	c.log.Debug(what, "err", err)
	c.conn.Close()
	return true
}

// w is the writer of c's connection; only the writer (write) writes.
func (c *client) w() wire.Writer { return wire.Writer{Conn: c.conn, Wait: writeWait} }

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
