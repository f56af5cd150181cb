package session

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// Connection limits and deadlines.
const (
	// writeWait bounds one frame write; a peer that cannot take a frame in
	// this time is dropped.
	writeWait = 10 * time.Second
	// helloWait is how long a new connection may take to send hello.
	helloWait = 10 * time.Second
	// pongWait is how long the connection may be silent (no frame, no
	// pong) before it is considered dead.
	pongWait = 60 * time.Second
	// pingPeriod is how often the writer pings; less than pongWait.
	pingPeriod = pongWait * 9 / 10
	// maxFrameBytes is the hard read limit: a frame over wire.MaxMessageBytes
	// but under this is drained and answered too_large; a larger one ends
	// the connection.
	maxFrameBytes = 16 << 20
	// sendBuffer is how many outgoing events may wait for the writer; a
	// client connection whose buffer is full is dropped.
	sendBuffer = 1024
	// replyBuffer is how many replies (messages without seq: hello, pong,
	// request errors) may wait for the writer, which sends them ahead of
	// queued events.
	replyBuffer = 256

	readBufferSize  = 4 << 10
	writeBufferSize = 4 << 10
	// bridgeSocketBuffer is the kernel send buffer of a bridge connection:
	// small, so that a reply the writer sends ahead of queued events waits
	// behind little output already in flight (the default is ~200 KiB,
	// over a second of a busy bridge's work).
	bridgeSocketBuffer = 32 << 10
)

// outgoing is one queued message; batch, when set, is written right after
// env (a bridge's replay, backlog.go); close asks the writer to close the
// connection after writing them.
type outgoing struct {
	env   wire.Envelope
	batch []wire.Envelope
	close bool
}

// conn is one WebSocket connection. Its reader runs on the ServeHTTP
// goroutine and owns the writer goroutine; the thread it is attached to
// only enqueues (never blocks on it).
type conn struct {
	s    *Server
	ws   *websocket.Conn
	log  *slog.Logger
	send chan outgoing // events, in order
	// replies are messages that answer a request or control the
	// connection; the writer sends them before any queued event, so a pong
	// does not wait behind a flood of output.
	replies chan outgoing

	stopOnce   sync.Once
	done       chan struct{} // closed by stop: the writer must quit
	writerDone chan struct{} // closed when the writer has quit

	thread *thread // set by the handshake; read by the reader only
	role   string  // the peer's hello role; set by the handshake (approval.go)
	// hostTools: the peer is a bridge whose hello said it answers
	// host_tools_list (hosttools.go); set by the handshake.
	hostTools bool
	// resumed is set once a bridge's resume was answered on c; the
	// thread's mutex guards it (backlog.go, approval.go).
	resumed bool

	termQueue // terminal frames and control messages (terminal.go)

	fwdq *wire.Queue[wire.Envelope] // stream frames and messages (forward.go)
	fwd  *forward.Mux               // set by the handshake
}

func newConn(s *Server, ws *websocket.Conn, log *slog.Logger) *conn {
	return &conn{
		s: s, ws: ws, log: log,
		send:       make(chan outgoing, sendBuffer),
		replies:    make(chan outgoing, replyBuffer),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		termQueue:  newTermQueue(),
		fwdq:       newFwdQueue(),
	}
}

// serve runs the connection: the writer on a new goroutine, the reader on
// this one. It returns when both have stopped and the socket is closed.
func (c *conn) serve() {
	go c.writePump()
	c.readPump()
	c.stop() // first: an emit waiting for room on c (holding the thread) gives up
	c.s.detachTerminals(c)
	c.stopForward() // forward.go
	if c.thread != nil {
		c.thread.detach(c)
	}
	<-c.writerDone
	c.log.Debug("connection closed")
}

// stop tells the writer to quit (it closes the socket, which ends the
// reader). Safe to call from any goroutine, more than once.
func (c *conn) stop() {
	c.stopOnce.Do(func() {
		close(c.done)
		c.term.Wake() // a terminal waiting for room finds c gone (terminal.go)
	})
}

// enqueue queues out for the writer behind the events queued before it.
// For a client the queue never waits: if it is full the peer is too slow,
// the connection is stopped and enqueue reports false. The bridge is never
// dropped — it keeps the thread's log, and dropping it would look like a
// dead sandbox — so for the bridge enqueue waits for room (or for the
// connection to end): a command that prints faster than the bridge stores
// is slowed down, back through the PTY.
func (c *conn) enqueue(out outgoing) bool { return c.push(c.send, out) }

// shrinkSendBuffer sets a bridge connection's kernel send buffer to
// bridgeSocketBuffer; it is best effort (not every net.Conn has one).
func (c *conn) shrinkSendBuffer() {
	if b, ok := c.ws.NetConn().(interface{ SetWriteBuffer(int) error }); ok {
		if err := b.SetWriteBuffer(bridgeSocketBuffer); err != nil {
			c.log.Debug("set socket send buffer", "err", err)
		}
	}
}

// push is enqueue on queue q (send or replies).
func (c *conn) push(q chan outgoing, out outgoing) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case q <- out:
		return true
	default:
	}
	if c.role == wire.RoleBridge {
		select {
		case q <- out:
			return true
		case <-c.done:
			return false
		}
	}
	c.log.Warn("peer too slow; dropping connection", "queued", len(c.send))
	c.drop()
	return false
}

// drop stops the connection at once: closing the socket also ends a write
// that is blocked on the slow peer.
func (c *conn) drop() {
	c.stop()
	_ = c.ws.NetConn().Close()
}

// reply sends a message that answers one request (no seq) ahead of the
// queued events; it blocks like enqueue.
func (c *conn) reply(env wire.Envelope) bool { return c.push(c.replies, outgoing{env: env}) }

// writePump writes queued messages — replies before events — and pings
// until stopped, the server closes, or a write fails; then it closes the
// socket.
func (c *conn) writePump() {
	defer close(c.writerDone)
	defer c.ws.Close()
	defer c.stop() // a failed writer releases whoever waits for room
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	for {
		select {
		case out := <-c.replies:
			if !c.writeOut(out) {
				return
			}
			continue
		default:
		}
		select {
		case out := <-c.replies:
			if !c.writeOut(out) {
				return
			}
		case out := <-c.send:
			if !c.writeOut(out) {
				return
			}
		case <-c.term.Ready():
			out, ok := c.term.TryNext()
			if !ok {
				continue
			}
			if err := c.writeTerm(out); err != nil {
				c.log.Debug("terminal write failed", "err", err)
				return
			}
		case <-c.fwdq.Ready():
			it, ok := c.fwdq.TryNext()
			if !ok {
				continue
			}
			if err := c.writeForward(it); err != nil { // forward.go
				c.log.Debug("stream write failed", "err", err)
				return
			}
		case <-ping.C:
			if err := c.w().Ping(); err != nil {
				c.log.Debug("ping failed", "err", err)
				return
			}
		case <-c.done:
			c.writeClose(websocket.CloseNormalClosure)
			return
		case <-c.s.hard.Done():
			c.writeClose(websocket.CloseGoingAway)
			return
		}
	}
}

// writeOut writes out (and its batch); false means the writer must quit:
// a write failed or out asked to close.
func (c *conn) writeOut(out outgoing) bool {
	if out.env.Type != "" {
		if err := c.write(out.env); err != nil {
			c.log.Debug("write failed", "err", err)
			return false
		}
	}
	for _, env := range out.batch {
		if err := c.write(env); err != nil {
			c.log.Debug("write failed", "err", err)
			return false
		}
	}
	if out.close {
		c.writeClose(websocket.ClosePolicyViolation)
		return false
	}
	return true
}

// w is the writer of c's socket; only writePump (and what it calls) writes.
func (c *conn) w() wire.Writer { return wire.Writer{Conn: c.ws, Wait: writeWait} }

func (c *conn) write(env wire.Envelope) error { return c.w().JSON(env) }

func (c *conn) writeClose(code int) { _ = c.w().Close(code, "") }

// closeWith sends env, then closes the connection; it waits (bounded) for
// the writer to flush. It always reports false, for the reader to return.
func (c *conn) closeWith(env wire.Envelope) bool {
	c.push(c.replies, outgoing{env: env, close: true})
	t := time.NewTimer(writeWait)
	defer t.Stop()
	select {
	case <-c.writerDone:
	case <-t.C:
	}
	return false
}

// next reads one frame. Errors of type wire.Error and wire.ErrTooLarge
// concern only that frame; any other error ends the connection.
func (c *conn) next() (wire.Envelope, error) {
	typ, r, err := c.ws.NextReader()
	if err != nil {
		return wire.Envelope{}, err
	}
	if err := c.ws.SetReadDeadline(time.Now().Add(pongWait)); err != nil {
		return wire.Envelope{}, err
	}
	for typ == websocket.BinaryMessage { // terminal input (terminal.go)
		c.input(r)
		if typ, r, err = c.ws.NextReader(); err != nil {
			return wire.Envelope{}, err
		}
		if err := c.ws.SetReadDeadline(time.Now().Add(pongWait)); err != nil {
			return wire.Envelope{}, err
		}
	}
	if typ != websocket.TextMessage {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return wire.Envelope{}, err
		}
		return wire.Envelope{}, wire.Error{Code: wire.CodeBadMessage, Message: "binary frames are not part of the protocol"}
	}
	return wire.ReadMessage(r, wire.MaxMessageBytes)
}

// frameError turns a per-frame read error into the error reply for it, or
// reports false when err ends the connection.
func frameError(thread string, err error) (wire.Envelope, bool) {
	var we wire.Error
	switch {
	case errors.Is(err, wire.ErrTooLarge):
		return wire.ErrorEnvelope(thread, "", wire.CodeTooLarge, "frame larger than %d bytes discarded", wire.MaxMessageBytes), true
	case errors.As(err, &we):
		return wire.MustNew(wire.TypeError, thread, "", we), true
	}
	return wire.Envelope{}, false
}

// logReadEnd logs why the reader stopped, quietly for ordinary closes.
func (c *conn) logReadEnd(err error) {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
		c.log.Debug("peer closed", "err", err)
		return
	}
	select {
	case <-c.done:
		c.log.Debug("connection stopped", "err", err)
	case <-c.s.hard.Done():
	default:
		c.log.Info("read failed; closing", "err", err)
	}
}
