package preview

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// A forward (`client forward`) is one TCP connection of the user's
// carried to a sandbox port: GET /v1/threads/{id}/forward/{port}
// upgrades to a WebSocket whose binary messages are the connection's
// bytes, each way; an empty binary message ends the sender's direction
// (half-close). The stream is opened before the upgrade, so a port
// nothing listens on is a 502 with a body that says so.
const (
	// maxForwardMessage bounds one message from the user (the client
	// sends at most wire.LargeStreamData); a larger one closes with 1009.
	maxForwardMessage = 1 << 20
	// forwardWriteWait bounds writing one message to the user.
	forwardWriteWait = 30 * time.Second
)

var upgrader = websocket.Upgrader{ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10} // same-origin check: gorilla's default

// serveForward answers GET /v1/threads/{id}/forward/{port}.
func (p *Preview) serveForward(w http.ResponseWriter, r *http.Request) {
	port, ok := pathPort(w, r)
	if !ok {
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "a forward is a WebSocket: send an upgrade request")
		return
	}
	id := r.PathValue("id")
	conn, err := p.cfg.Backend.DialPort(r.Context(), id, port)
	if err != nil {
		p.upstreamError(w, r, err)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		conn.Close()
		return // the upgrader answered
	}
	p.log.Debug("forward opened", "thread", id, "port", port)
	pipe(ws, conn)
	p.log.Debug("forward closed", "thread", id, "port", port)
}

// pipe carries bytes between ws and conn until both directions ended or
// either side failed, then closes both. It blocks until then; it waits
// for the two goroutines it starts.
func pipe(ws *websocket.Conn, conn net.Conn) {
	defer ws.Close()
	defer conn.Close()
	ws.SetReadLimit(maxForwardMessage)
	down, up := make(chan error, 1), make(chan error, 1)
	go func() { down <- toUser(ws, conn) }()
	go func() { up <- fromUser(ws, conn) }()
	closeWith := func(code int, text string) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, trimClose(text)), time.Now().Add(time.Second))
	}
	var upErr, downErr error
	select {
	case upErr = <-up: // the user closed (or failed): the forward is over
		conn.Close() // ends toUser's read
		downErr = <-down
	case downErr = <-down:
		if downErr != nil { // the stream failed: say why, and stop reading the user
			closeWith(websocket.CloseInternalServerErr, downErr.Error())
			ws.Close()
		}
		upErr = <-up
	}
	switch {
	case errors.Is(upErr, websocket.ErrReadLimit):
		closeWith(websocket.CloseMessageTooBig, "message larger than 1 MiB")
	case downErr == nil:
		closeWith(websocket.CloseNormalClosure, "")
	}
}

// trimClose fits text in a close frame's reason (123 bytes).
func trimClose(text string) string {
	if len(text) > 120 {
		return text[:120]
	}
	return text
}

// fromUser copies the user's messages into conn; an empty message, or
// the user's close, ends conn's writing. It returns nil for an orderly
// end.
func fromUser(ws *websocket.Conn, conn net.Conn) error {
	for {
		mt, r, err := ws.NextReader()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				closeWrite(conn)
				return nil
			}
			return err
		}
		if mt != websocket.BinaryMessage {
			return errors.New("a forward carries binary messages only")
		}
		n, err := io.Copy(conn, r)
		if err != nil {
			return err
		}
		if n == 0 {
			closeWrite(conn)
		}
	}
}

// toUser copies conn into binary messages; at conn's end it sends an
// empty one. It returns nil for an orderly end.
func toUser(ws *websocket.Conn, conn net.Conn) error {
	buf := make([]byte, wire.LargeStreamData) // a stream's largest frame; clients take up to 1 MiB
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			_ = ws.SetWriteDeadline(time.Now().Add(forwardWriteWait))
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			_ = ws.SetWriteDeadline(time.Now().Add(forwardWriteWait))
			return ws.WriteMessage(websocket.BinaryMessage, nil)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil // fromUser ended the forward
			}
			return err
		}
	}
}

func closeWrite(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
