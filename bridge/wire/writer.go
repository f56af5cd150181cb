package wire

import (
	"encoding/binary"
	"time"
)

// WebSocket message types (RFC 6455 opcodes), as github.com/gorilla/websocket
// numbers them.
const (
	TextMessage   = 1
	BinaryMessage = 2
	CloseMessage  = 8
	PingMessage   = 9
)

// Conn is the write side of a WebSocket connection; gorilla/websocket's
// *Conn implements it.
type Conn interface {
	SetWriteDeadline(t time.Time) error
	WriteMessage(messageType int, data []byte) error
	WriteControl(messageType int, data []byte, deadline time.Time) error
	WriteJSON(v any) error
}

// Writer writes frames to a Conn, each within Wait. A connection's one
// writer goroutine (its pump) owns it; it is not safe for concurrent use,
// as the Conn is not. Every call blocks until its frame is written or
// Wait passes.
type Writer struct {
	Conn Conn
	// Wait bounds writing one frame.
	Wait time.Duration
}

// JSON writes v as one text message.
func (w Writer) JSON(v any) error {
	if err := w.Conn.SetWriteDeadline(time.Now().Add(w.Wait)); err != nil {
		return err
	}
	return w.Conn.WriteJSON(v)
}

// Message writes data as one message of the given type.
func (w Writer) Message(messageType int, data []byte) error {
	if err := w.Conn.SetWriteDeadline(time.Now().Add(w.Wait)); err != nil {
		return err
	}
	return w.Conn.WriteMessage(messageType, data)
}

// Binary writes data as one binary message.
func (w Writer) Binary(data []byte) error { return w.Message(BinaryMessage, data) }

// Ping writes a ping control frame.
func (w Writer) Ping() error {
	return w.Conn.WriteControl(PingMessage, nil, time.Now().Add(w.Wait))
}

// Close writes a close frame with code and text; the caller closes the
// connection after it.
func (w Writer) Close(code int, text string) error {
	return w.Conn.WriteControl(CloseMessage, CloseFrame(code, text), time.Now().Add(w.Wait))
}

// closeNoStatus (1005) is never sent: a close frame with it has no body.
const closeNoStatus = 1005

// CloseFrame is the body of a close frame: code, then text (as
// gorilla/websocket's FormatCloseMessage).
func CloseFrame(code int, text string) []byte {
	if code == closeNoStatus {
		return []byte{}
	}
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(text)), uint16(code))
	return append(b, text...)
}
