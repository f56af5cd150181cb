package session_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// listen starts a TCP server on the loopback that runs serve for each
// connection; it stops at the test's end.
func listen(t *testing.T, serve func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().(*net.TCPAddr).Port
}

// streamRead is what readStream collected: the stream's bytes, whether
// its end came, and the messages on the way.
type streamRead struct {
	data     bytes.Buffer
	eof      bool
	maxFrame int // the largest data frame
	messages []wire.Envelope
}

// readUntil reads frames and messages until stop says so or waitFor
// passes (which fails the test).
func (c *client) readUntil(stream string, got *streamRead, stop func() bool) {
	c.t.Helper()
	for !stop() {
		if err := c.ws.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
			c.t.Fatal(err)
		}
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("read: %v (stream so far %d bytes)", err, got.data.Len())
		}
		if mt == websocket.BinaryMessage {
			f, err := wire.ParseFrame(data)
			if err != nil || f.Session != stream {
				c.t.Fatalf("frame %+v: %v", f, err)
			}
			if f.Kind == wire.FrameStreamData {
				got.data.Write(f.Data)
				got.maxFrame = max(got.maxFrame, len(f.Data))
				got.eof = got.eof || len(f.Data) == 0
			}
			continue
		}
		env, err := wire.Parse(data)
		if err != nil {
			c.t.Fatal(err)
		}
		got.messages = append(got.messages, env)
	}
}

func (c *client) binary(frame []byte, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		c.t.Fatal(err)
	}
}

func hasType(envs []wire.Envelope, typ wire.Type) bool {
	return slices.ContainsFunc(envs, func(e wire.Envelope) bool { return e.Type == typ })
}

// TestForwardEcho: a stream reaches a server on the loopback, carries bytes
// both ways, half-closes, and ends with stream_close.
func TestForwardEcho(t *testing.T) {
	port := listen(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	c := e.dial("")
	c.send(wire.MustNew(wire.TypePortOpen, "", "o1", wire.PortOpen{Stream: "s1", Port: port}))
	if got := c.next(); got.Type != wire.TypePortOpened || got.ID != "o1" {
		t.Fatalf("answer %s %s", got.Type, got.Data)
	}
	c.binary(wire.AppendStreamData(nil, "s1", []byte("hello through the sandbox")))
	c.binary(wire.AppendStreamData(nil, "s1", nil)) // our end: the echo server ends too
	var got streamRead
	c.readUntil("s1", &got, func() bool { return hasType(got.messages, wire.TypeStreamClose) })
	if got.data.String() != "hello through the sandbox" || !got.eof {
		t.Fatalf("echoed %q, end %v", got.data.String(), got.eof)
	}
	c.send(wire.MustNew(wire.TypePing, "", "p", nil)) // the connection carries on
	if got := c.next(); got.Type != wire.TypePong {
		t.Fatalf("after the stream: %s", got.Type)
	}
}

// TestForwardRefused: a port nothing listens on is a stream_close with
// port_closed and a clear message; bad requests say what is wrong.
func TestForwardRefused(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	c := e.dial("")
	cases := []struct {
		open wire.PortOpen
		code wire.Code
		want string
	}{
		{wire.PortOpen{Stream: "s1", Port: free}, wire.CodePortClosed, "nothing listens on port"},
		{wire.PortOpen{Stream: "s2", Port: 0}, wire.CodeBadMessage, "port 0 is not 1 to 65535"},
		{wire.PortOpen{Stream: "s3", Port: 70000}, wire.CodeBadMessage, "port 70000"},
		{wire.PortOpen{Stream: strings.Repeat("x", 65), Port: 80}, wire.CodeBadMessage, "stream id of 1 to 64 bytes"},
	}
	for _, tc := range cases {
		c.send(wire.MustNew(wire.TypePortOpen, "", "o", tc.open))
		got := c.next()
		sc := decode[wire.StreamClose](t, got)
		if got.Type != wire.TypeStreamClose || got.ID != "o" || sc.Code != tc.code || !strings.Contains(sc.Message, tc.want) {
			t.Errorf("%+v: answered %s %+v, want %s saying %q", tc.open, got.Type, sc, tc.code, tc.want)
		}
	}
	c.sendRaw([]byte(`{"type":"port_open","id":"o","data":{"stream":7}}`))
	expectError(t, c.next(), wire.CodeBadMessage, "o")
}

// TestForwardSlowStreamStallsOnlyItself: a stream nobody gives credit to
// gets one window of bytes and no more, while the connection answers at
// once and another stream works.
func TestForwardSlowStreamStallsOnlyItself(t *testing.T) {
	flood := listen(t, func(c net.Conn) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	echo := listen(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	c := e.dial("")
	c.send(wire.MustNew(wire.TypePortOpen, "", "o1", wire.PortOpen{Stream: "slow", Port: flood}))
	var slow streamRead
	c.readUntil("slow", &slow, func() bool { return slow.data.Len() >= wire.StreamWindow })
	c.send(wire.MustNew(wire.TypePortOpen, "", "o2", wire.PortOpen{Stream: "fast", Port: echo}))
	c.send(wire.MustNew(wire.TypePing, "", "p", nil))
	var fast streamRead
	c.readUntil("fast", &fast, func() bool {
		return hasType(fast.messages, wire.TypePong) && hasType(fast.messages, wire.TypePortOpened)
	})
	c.binary(wire.AppendStreamData(nil, "fast", []byte("still here")))
	c.readUntil("fast", &fast, func() bool { return fast.data.String() == "still here" })
	if slow.data.Len() != wire.StreamWindow {
		t.Fatalf("the slow stream sent %d bytes without credit, window %d", slow.data.Len(), wire.StreamWindow)
	}
	c.binary(wire.AppendStreamWindow(nil, "slow", 1000)) // credit: exactly that much more comes
	c.readUntil("slow", &slow, func() bool { return slow.data.Len() >= wire.StreamWindow+1000 })
}

// TestForwardStreamLimits: a port_open that offers limits gets the
// agent's in port_opened, and the stream runs at them both ways (frames up
// to the bridge's Data, a window of the bridge's Window); one that offers
// none (a bridge before them) gets none and the defaults; an offer that
// breaks the rules is refused.
func TestForwardStreamLimits(t *testing.T) {
	flood := listen(t, func(c net.Conn) {
		go func() { _, _ = io.Copy(io.Discard, c) }()
		chunk := make([]byte, 256<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	cases := []struct {
		name   string
		offer  *wire.StreamLimits
		limits wire.StreamLimits // what the stream should run at, both ways
	}{
		{"offered", &wire.OfferedStreamLimits, wire.OfferedStreamLimits},
		{"none", nil, wire.DefaultStreamLimits},
		{"smaller", &wire.StreamLimits{Data: 10000, Window: 50000}, wire.StreamLimits{Data: 10000, Window: 50000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial("")
			c.send(wire.MustNew(wire.TypePortOpen, "", "o1", wire.PortOpen{Stream: "s", Port: flood, Limits: tc.offer}))
			var got streamRead
			c.readUntil("s", &got, func() bool { return got.data.Len() >= tc.limits.Window })
			opened := decode[wire.StreamRef](t, got.messages[0])
			switch {
			case tc.offer == nil && opened.Limits != nil:
				t.Fatalf("port_opened offers %+v to a bridge that offered nothing", opened.Limits)
			case tc.offer != nil && (opened.Limits == nil || *opened.Limits != wire.OfferedStreamLimits):
				t.Fatalf("port_opened offers %+v, want %+v", opened.Limits, wire.OfferedStreamLimits)
			}
			c.send(wire.MustNew(wire.TypePing, "", "p", nil))
			c.readUntil("s", &got, func() bool { return hasType(got.messages, wire.TypePong) })
			if got.data.Len() != tc.limits.Window || got.maxFrame != tc.limits.Data {
				t.Fatalf("sent %d bytes without credit in frames of up to %d, want a window of %d in frames of %d",
					got.data.Len(), got.maxFrame, tc.limits.Window, tc.limits.Data)
			}
			own := wire.DefaultStreamLimits.Data // what the agent takes from us
			if tc.offer != nil {
				own = wire.OfferedStreamLimits.Data
			}
			c.binary(wire.AppendStreamData(nil, "s", make([]byte, own))) // at its limit: taken
			over := append([]byte{byte(wire.FrameVersion<<4) | byte(wire.FrameStreamData), 1, 's'}, make([]byte, own+1)...)
			c.binary(over, nil)
			// Over the stream's limit closes the stream; over any stream's
			// (the offered limits are the largest) is a bad frame.
			want := wire.TypeStreamClose
			if own == wire.LargeStreamData {
				want = wire.TypeError
			}
			c.readUntil("s", &got, func() bool { return hasType(got.messages, want) })
			last := got.messages[len(got.messages)-1]
			if !strings.Contains(string(last.Data), fmt.Sprintf("more than %d", own)) || (want == wire.TypeStreamClose && decode[wire.StreamClose](t, last).Code != wire.CodeBadMessage) {
				t.Fatalf("a frame over the agent's limit answered %s %s", last.Type, last.Data)
			}
		})
	}
	c := e.dial("")
	c.send(wire.MustNew(wire.TypePortOpen, "", "o", wire.PortOpen{Stream: "bad", Port: flood, Limits: &wire.StreamLimits{Data: 4096, Window: 100}}))
	got := c.next()
	if sc := decode[wire.StreamClose](t, got); got.Type != wire.TypeStreamClose || sc.Code != wire.CodeBadMessage || !strings.Contains(sc.Message, "1 ≤ data ≤ window") {
		t.Fatalf("limits that break the rules answered %s %s", got.Type, got.Data)
	}
}

// TestForwardBadFrames: frames that break the rules close their stream or
// are answered bad_message; the connection stays.
func TestForwardBadFrames(t *testing.T) {
	port := listen(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}})
	c := e.dial("")
	c.send(wire.MustNew(wire.TypePortOpen, "", "o1", wire.PortOpen{Stream: "s1", Port: port}))
	if got := c.next(); got.Type != wire.TypePortOpened {
		t.Fatalf("answer %s %s", got.Type, got.Data)
	}
	c.binary(wire.AppendStreamWindow(nil, "s1", wire.StreamWindow)) // credit it never lent
	got := c.next()
	if sc := decode[wire.StreamClose](t, got); got.Type != wire.TypeStreamClose || sc.Code != wire.CodeBadMessage || !strings.Contains(sc.Message, "beyond the window") {
		t.Fatalf("credit overflow answered %s %s", got.Type, got.Data)
	}
	c.binary([]byte{0x14, 2, 's', '1', 0, 1}, nil) // a window frame of 2 bytes
	if got := c.next(); got.Type != wire.TypeError || !strings.Contains(string(got.Data), "carries 4 bytes") {
		t.Fatalf("short window answered %s %s", got.Type, got.Data)
	}
	c.binary(append([]byte{0x13, 2, 's', '1'}, make([]byte, wire.MaxBinaryFrame)...), nil) // longer than any frame: cut, refused
	if got := c.next(); got.Type != wire.TypeError || !strings.Contains(string(got.Data), "more than 131072") {
		t.Fatalf("an overlong frame answered %s %s", got.Type, got.Data)
	}
	c.binary(wire.AppendStreamData(nil, "nobody", []byte("x"))) // not open: dropped
	c.send(wire.MustNew(wire.TypePing, "", "p", nil))
	if got := c.next(); got.Type != wire.TypePong {
		t.Fatalf("after bad frames: %s %s", got.Type, got.Data)
	}
}

// TestForwardPorts: port_list names a listening port, and a ports event
// follows when a port starts listening.
func TestForwardPorts(t *testing.T) {
	tables := forward.Tables{FDs: t.TempDir()} // the test's own sockets count
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}, Forward: forward.Config{Tables: tables}, PortsInterval: 20 * time.Millisecond})
	c := e.dial("")
	port := listen(t, func(net.Conn) {})
	has := func(ports []wire.Port) bool {
		return slices.ContainsFunc(ports, func(p wire.Port) bool { return p.Port == port && p.Address == "127.0.0.1" })
	}
	deadline := time.Now().Add(waitFor)
	for {
		env := c.next()
		if env.Type == wire.TypePorts && env.Seq > 0 && has(decode[wire.Ports](t, env).Ports) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no ports event named the new port")
		}
	}
	c.send(wire.MustNew(wire.TypePortList, "", "l1", nil))
	got, _ := c.await(wire.TypePorts)
	for got.ID != "l1" {
		got, _ = c.await(wire.TypePorts)
	}
	if got.Seq != 0 || !has(decode[wire.Ports](t, got).Ports) {
		t.Fatalf("port_list answered %+v %s", got, got.Data)
	}
}

// TestForwardIdle: a stream that carries nothing either way for the idle
// limit is closed with code idle; one that carries bytes is not.
func TestForwardIdle(t *testing.T) {
	port := listen(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}}, Forward: forward.Config{Idle: 300 * time.Millisecond}})
	c := e.dial("")
	c.send(wire.MustNew(wire.TypePortOpen, "", "o1", wire.PortOpen{Stream: "quiet", Port: port}))
	if got := c.next(); got.Type != wire.TypePortOpened {
		t.Fatalf("answer %s %s", got.Type, got.Data)
	}
	start := time.Now()
	got := c.next()
	sc := decode[wire.StreamClose](t, got)
	if got.Type != wire.TypeStreamClose || sc.Stream != "quiet" || sc.Code != wire.CodeIdle || !strings.Contains(sc.Message, "idle for 300ms") {
		t.Fatalf("idle stream: %s %s", got.Type, got.Data)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the idle limit", took)
	}
}
