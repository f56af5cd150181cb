package chat

import (
	"fmt"
	"io"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// readPump is the connection's only reader. It hands frames to the
// Receiver (when there is one), wakes Request waiters, delivers the other
// messages on c.events, and on return records why it stopped and closes
// c.events and c.readDone. It never blocks on the consumer: a full
// c.events ends the connection with ErrSlowConsumer.
func (c *Conn) readPump() {
	defer func() {
		// readDone first: whoever sees Events closed finds the
		// connection already ended (Send fails, Err is set).
		close(c.readDone)
		close(c.events)
	}()
	alive := func() { _ = c.ws.SetReadDeadline(time.Now().Add(pongWait)) }
	alive()
	c.ws.SetPongHandler(func(string) error { alive(); return nil })
	var frames []byte // binary frames are read into it, reused (Receiver.Binary)
	for {
		kind, data, err := c.readMessage(&frames)
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			c.log.Debug("reader stopped", "err", c.Err())
			return
		}
		alive()
		if err := c.route(kind, data); err != nil {
			c.fail(err)
			c.log.Warn("dropping connection", "err", err)
			_ = c.ws.Close()
			return
		}
	}
}

// reuseLimit bounds the binary frame buffer the reader keeps between
// frames; terminal frames are at most wire.MaxFrameData and a header.
const reuseLimit = 2 * wire.MaxFrameData

// readMessage reads the next message whole. A binary frame is read into
// *buf, which is kept for the next one (a terminal stream then costs no
// allocation per frame: Receiver.Binary's data is valid only during the
// call); a text message gets a buffer of its own, as Events keeps it.
func (c *Conn) readMessage(buf *[]byte) (int, []byte, error) {
	kind, r, err := c.ws.NextReader()
	if err != nil {
		return kind, nil, err
	}
	if kind != websocket.BinaryMessage {
		data, err := io.ReadAll(r)
		return kind, data, err
	}
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return kind, nil, err
		}
	}
	if cap(b) <= reuseLimit {
		*buf = b
	}
	return kind, b, nil
}

// route hands one frame to the Receiver (pongs excepted), then a reply to
// the Request waiting for it, else the message to Events. An
// error ends the connection: a full Events, or a panicking Receiver.
func (c *Conn) route(kind int, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("receiver panicked: %v", r)
		}
	}()
	if kind == websocket.BinaryMessage {
		if c.rcv != nil {
			c.rcv.Binary(data)
		} else {
			c.log.Debug("ignoring binary frame", "bytes", len(data))
		}
		return nil
	}
	env, err := wire.Parse(data)
	if err != nil {
		c.log.Warn("ignoring frame", "err", err)
		return nil
	}
	if isSeqAhead(env) {
		// The bridge's log ends before our AfterSeq: its events follow from
		// the seq its hello answer named, and are not repeats to drop.
		c.lastSeq.Store(c.server.AfterSeq)
	}
	consumed := env.Type == wire.TypePong || (c.rcv != nil && c.rcv.Message(env))
	if c.wake(env) || consumed {
		return nil
	}
	if !c.deliver(env) {
		return fmt.Errorf("%w: more than %d unread", ErrSlowConsumer, cap(c.events))
	}
	return nil
}

// isSeqAhead reports whether env is the bridge's error saying the hello's
// after_seq was ahead of the thread's log (sent before any event).
func isSeqAhead(env wire.Envelope) bool {
	var werr wire.Error
	return env.Type == wire.TypeError && env.Seq == 0 && env.Decode(&werr) == nil && werr.Code == wire.CodeSeqAhead
}

// deliver puts env on c.events without waiting and advances LastSeq; it
// reports false when c.events is full.
func (c *Conn) deliver(env wire.Envelope) bool {
	prev := c.lastSeq.Load()
	if env.Seq != 0 && env.Seq <= prev && wire.IsEvent(env.Type) {
		return true // already delivered before a reconnect: drop the repeat
	}
	if env.Seq > prev {
		c.lastSeq.Store(env.Seq)
	}
	select {
	case c.events <- env:
		return true
	default:
		c.lastSeq.Store(prev)
		return false
	}
}

// wake hands a reply (a message without a seq) to the Request waiting
// for its id, and reports whether there was one.
func (c *Conn) wake(env wire.Envelope) bool {
	if env.Seq != 0 || env.ID == "" {
		return false
	}
	c.mu.Lock()
	waiter := c.pending[env.ID]
	delete(c.pending, env.ID)
	c.mu.Unlock()
	if waiter == nil {
		return false
	}
	waiter <- env // capacity 1, and the id is now out of pending
	return true
}

// writePump is the connection's only writer: it writes queued frames and
// WebSocket keep-alive pings. On Close it sends a close frame and waits up
// to closeGrace for the reader to see the server's; when the reader stops
// (or a write fails) it closes the socket, which in turn stops the reader.
func (c *Conn) writePump() {
	defer close(c.writeDone)
	defer c.ws.Close()
	w := wire.Writer{Conn: c.ws, Wait: writeWait}
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	for {
		select {
		case out := <-c.outbox:
			select {
			case <-c.readDone: // the connection is ending: write nothing more
				out.done <- c.endErr()
				return
			default:
			}
			err := w.Message(out.kind, out.data)
			out.done <- err
			if err != nil {
				c.fail(fmt.Errorf("write: %w", err))
				return
			}
		case <-ticker.C:
			if err := w.Ping(); err != nil {
				c.fail(fmt.Errorf("write ping: %w", err))
				return
			}
		case <-c.quit:
			if w.Close(websocket.CloseNormalClosure, "") == nil {
				grace := time.NewTimer(closeGrace)
				select {
				case <-c.readDone:
				case <-grace.C:
				}
				grace.Stop()
			}
			return
		case <-c.readDone:
			return
		}
	}
}
