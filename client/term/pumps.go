package term

import (
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// readPump is the connection's only reader: it hands output frames and
// JSON messages to the Handler in order, then wakes the request waiting
// for a reply. It returns when the socket fails or closes, closing
// readDone.
func (c *Conn) readPump() {
	defer close(c.readDone)
	alive := func() { _ = c.ws.SetReadDeadline(time.Now().Add(pongWait)) }
	alive()
	c.ws.SetPongHandler(func(string) error { alive(); return nil })
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			c.log.Debug("terminal reader stopped", "err", c.Err())
			return
		}
		alive()
		if err := c.dispatch(kind, data); err != nil {
			c.fail(err)
			_ = c.ws.Close()
			return
		}
	}
}

// dispatch handles one frame; an error (a panicking Handler) ends the
// connection.
func (c *Conn) dispatch(kind int, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("terminal handler panicked: %v", r)
		}
	}()
	if kind == websocket.BinaryMessage {
		f, perr := wire.ParseFrame(data)
		if perr != nil || f.Kind != wire.FrameOutput {
			c.log.Warn("ignoring binary frame", "err", perr)
			return nil
		}
		c.h.Output(f.Session, f.Data)
		return nil
	}
	env, perr := wire.Parse(data)
	if perr != nil {
		c.log.Warn("ignoring frame", "err", perr)
		return nil
	}
	c.h.Message(env)
	if env.ID != "" && env.Seq == 0 {
		c.mu.Lock()
		waiter := c.pending[env.ID]
		delete(c.pending, env.ID)
		c.mu.Unlock()
		if waiter != nil {
			waiter <- env // capacity 1, one reply per id
		}
	}
	return nil
}

// writePump is the connection's only writer: queued frames and keep-alive
// pings. On Close it sends a close frame and waits up to closeGrace for
// the reader to end; it closes the socket on return, which ends the
// reader.
func (c *Conn) writePump() {
	defer close(c.writeDone)
	defer c.ws.Close()
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	for {
		select {
		case out := <-c.outbox:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			err := c.ws.WriteMessage(out.kind, out.data)
			out.done <- err
			if err != nil {
				c.fail(fmt.Errorf("write: %w", err))
				return
			}
		case <-ticker.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				c.fail(fmt.Errorf("write ping: %w", err))
				return
			}
		case <-c.quit:
			msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			if c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait)) == nil {
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
