package wire_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeConn records what is written to it.
type fakeConn struct {
	deadlines int
	kinds     []int
	data      [][]byte
	fail      error
}

func (c *fakeConn) SetWriteDeadline(time.Time) error { c.deadlines++; return c.fail }
func (c *fakeConn) WriteMessage(kind int, data []byte) error {
	c.kinds, c.data = append(c.kinds, kind), append(c.data, data)
	return nil
}
func (c *fakeConn) WriteControl(kind int, data []byte, deadline time.Time) error {
	if time.Until(deadline) <= 0 {
		return errors.New("deadline in the past")
	}
	return c.WriteMessage(kind, data)
}
func (c *fakeConn) WriteJSON(v any) error { return c.WriteMessage(wire.TextMessage, []byte("json")) }

// A gorilla/websocket connection is a wire.Conn.
var _ wire.Conn = (*websocket.Conn)(nil)

func TestWriter(t *testing.T) {
	t.Parallel()
	c := &fakeConn{}
	w := wire.Writer{Conn: c, Wait: time.Second}
	for _, err := range []error{w.JSON(1), w.Binary([]byte("b")), w.Ping(), w.Close(websocket.CloseGoingAway, "bye")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []int{websocket.TextMessage, websocket.BinaryMessage, websocket.PingMessage, websocket.CloseMessage}
	if len(c.kinds) != len(want) {
		t.Fatalf("kinds %v", c.kinds)
	}
	for i := range want {
		if c.kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", c.kinds, want)
		}
	}
	if c.deadlines != 2 {
		t.Fatalf("%d write deadlines set, want 2 (control frames carry their own)", c.deadlines)
	}
	c.fail = errors.New("closed")
	if err := w.Binary(nil); err == nil {
		t.Fatal("a failing deadline did not fail the write")
	}
}

func TestCloseFrameAsGorilla(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		text string
	}{{websocket.CloseNormalClosure, ""}, {websocket.CloseTryAgainLater, "client too slow"}, {websocket.CloseNoStatusReceived, "x"}} {
		if got, want := wire.CloseFrame(tc.code, tc.text), websocket.FormatCloseMessage(tc.code, tc.text); !bytes.Equal(got, want) {
			t.Errorf("CloseFrame(%d, %q) = %x, want %x", tc.code, tc.text, got, want)
		}
	}
}
