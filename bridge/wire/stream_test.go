package wire_test

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

func init() {
	golden = append(golden,
		struct {
			name string
			env  wire.Envelope
		}{"port_open", wire.MustNew(wire.TypePortOpen, "t_4f9c2a1b3c5d", "~s7", wire.PortOpen{Stream: "~s7", Port: 8000})},
		struct {
			name string
			env  wire.Envelope
		}{"port_opened", wire.MustNew(wire.TypePortOpened, "t_4f9c2a1b3c5d", "~s7", wire.StreamRef{Stream: "~s7"})},
		struct {
			name string
			env  wire.Envelope
		}{"stream_close_refused", wire.MustNew(wire.TypeStreamClose, "t_4f9c2a1b3c5d", "~s8", wire.StreamClose{Stream: "~s8", Code: wire.CodePortClosed, Message: "nothing listens on port 5173 in the sandbox (127.0.0.1 and ::1 refused the connection)"})},
		struct {
			name string
			env  wire.Envelope
		}{"stream_close", wire.MustNew(wire.TypeStreamClose, "t_4f9c2a1b3c5d", "", wire.StreamClose{Stream: "~s7"})},
		struct {
			name string
			env  wire.Envelope
		}{"port_list", wire.MustNew(wire.TypePortList, "t_4f9c2a1b3c5d", "~s9", nil)},
		struct {
			name string
			env  wire.Envelope
		}{"ports", withSeq(wire.MustNew(wire.TypePorts, "t_4f9c2a1b3c5d", "", wire.Ports{Ports: []wire.Port{{Port: 8000, Address: "0.0.0.0"}, {Port: 5173, Address: "::1"}}}), 22)},
	)
}

func TestStreamFrames(t *testing.T) {
	t.Parallel()
	data, err := wire.AppendStreamData(nil, "~s1", []byte("GET / HTTP/1.1\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.ParseFrame(data)
	if err != nil || f.Kind != wire.FrameStreamData || f.Session != "~s1" || string(f.Data) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("data frame = %+v, %v", f, err)
	}
	win, err := wire.AppendStreamWindow(nil, "~s1", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := wire.ParseFrame(win); err != nil || f.Kind != wire.FrameStreamWindow || f.WindowOf() != 4096 {
		t.Fatalf("window frame = %+v, %v", f, err)
	}
	eof, _ := wire.AppendStreamData(nil, "~s1", nil)
	if f, err := wire.ParseFrame(eof); err != nil || len(f.Data) != 0 {
		t.Fatalf("end frame = %+v, %v", f, err)
	}
}

// TestStreamFramesRefused: every malformed stream frame is refused with a
// message that says what is wrong.
func TestStreamFramesRefused(t *testing.T) {
	t.Parallel()
	raw := func(kind wire.FrameKind, id string, data []byte) []byte {
		return append(append([]byte{byte(wire.FrameVersion<<4) | byte(kind), byte(len(id))}, id...), data...)
	}
	cases := []struct {
		name, want string
		frame      []byte
	}{
		{"data over the limit", "more than", raw(wire.FrameStreamData, "~s1", make([]byte, wire.MaxStreamData+1))},
		{"long stream id", "stream id of 65 bytes", raw(wire.FrameStreamData, strings.Repeat("s", 65), nil)},
		{"short window", "carries 4 bytes, not 2", raw(wire.FrameStreamWindow, "~s1", []byte{0, 1})},
		{"zero window", "a window of 0 bytes", raw(wire.FrameStreamWindow, "~s1", []byte{0, 0, 0, 0})},
		{"huge window", "a window of 4294967295", raw(wire.FrameStreamWindow, "~s1", []byte{0xff, 0xff, 0xff, 0xff})},
		{"unknown kind", "unknown kind 5", raw(5, "~s1", nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := wire.ParseFrame(c.frame)
			if !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseFrame = %v, want ErrBadFrame saying %q", err, c.want)
			}
		})
	}
	if _, err := wire.AppendStreamData(nil, "~s1", make([]byte, wire.MaxStreamData+1)); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("AppendStreamData of too much = %v", err)
	}
}

// TestInboxWindow: an inbox holds at most a window; what is read comes
// back as credit in batches; the end is io.EOF after the data.
func TestInboxWindow(t *testing.T) {
	t.Parallel()
	in := wire.NewInbox()
	chunk := make([]byte, wire.MaxStreamData)
	for i := 0; i < wire.StreamWindow/wire.MaxStreamData; i++ {
		if err := in.Push(chunk); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if err := in.Push([]byte{1}); !errors.Is(err, wire.ErrStreamWindow) {
		t.Fatalf("push past the window = %v, want ErrStreamWindow", err)
	}
	var credit uint32
	buf := make([]byte, 1000)
	for in.Buffered() > 0 {
		_, c, err := in.Read(buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c != 0 && c < wire.StreamWindow/4 && in.Buffered() > 0 {
			t.Fatalf("credit of %d returned early", c)
		}
		credit += c
	}
	if credit != wire.StreamWindow {
		t.Fatalf("credit returned %d, want %d", credit, wire.StreamWindow)
	}
	if err := in.Push(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.Read(buf, nil); err != io.EOF {
		t.Fatalf("read after end = %v, want EOF", err)
	}
	if err := in.Push([]byte("late")); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("data after the end = %v", err)
	}
}

func TestInboxDeadlineAndAbort(t *testing.T) {
	t.Parallel()
	in := wire.NewInbox()
	var d wire.Deadline
	d.Set(time.Now().Add(20 * time.Millisecond))
	if _, _, err := in.Read(make([]byte, 8), d.Done()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline = %v", err)
	}
	d.Set(time.Time{}) // no deadline: a fresh channel
	select {
	case <-d.Done():
		t.Fatal("a cleared deadline is still passed")
	default:
	}
	d.Set(time.Now().Add(-time.Second))
	<-d.Done()
	d.Set(time.Now().Add(time.Hour))
	d.Set(time.Now().Add(time.Hour)) // no panic on a second set
	boom := errors.New("boom")
	go in.Abort(boom)
	if _, _, err := in.Read(make([]byte, 8), nil); !errors.Is(err, boom) {
		t.Fatalf("read of an aborted inbox = %v", err)
	}
}

func TestCredit(t *testing.T) {
	t.Parallel()
	c := wire.NewCredit()
	n, err := c.Take(wire.StreamWindow+100, nil)
	if err != nil || n != wire.StreamWindow {
		t.Fatalf("take = %d, %v", n, err)
	}
	var d wire.Deadline
	d.Set(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Take(1, d.Done()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("take without credit = %v", err)
	}
	got := make(chan int)
	go func() {
		n, _ := c.Take(10, nil)
		got <- n
	}()
	if err := c.Add(7); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 7 {
		t.Fatalf("took %d after 7 came back", n)
	}
	if err := c.Add(wire.StreamWindow); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(1); !errors.Is(err, wire.ErrStreamWindow) {
		t.Fatalf("credit past the window = %v", err)
	}
}
