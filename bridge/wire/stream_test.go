package wire_test

import (
	"errors"
	"fmt"
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
		}{"port_open", wire.MustNew(wire.TypePortOpen, "t_4f9c2a1b3c5d", "~s7", wire.PortOpen{Stream: "~s7", Port: 8000, Limits: &wire.OfferedStreamLimits})},
		struct {
			name string
			env  wire.Envelope
		}{"port_opened", wire.MustNew(wire.TypePortOpened, "t_4f9c2a1b3c5d", "~s7", wire.StreamRef{Stream: "~s7", Limits: &wire.OfferedStreamLimits})},
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
		{"data over the limit", "more than 131072", raw(wire.FrameStreamData, "~s1", make([]byte, wire.LargeStreamData+1))},
		{"long stream id", "stream id of 65 bytes", raw(wire.FrameStreamData, strings.Repeat("s", 65), nil)},
		{"short window", "carries 4 bytes, not 2", raw(wire.FrameStreamWindow, "~s1", []byte{0, 1})},
		{"zero window", "a window of 0 bytes", raw(wire.FrameStreamWindow, "~s1", []byte{0, 0, 0, 0})},
		{"huge window", "a window of 4294967295", raw(wire.FrameStreamWindow, "~s1", []byte{0xff, 0xff, 0xff, 0xff})},
		{"window over the largest", "a window of 524289", raw(wire.FrameStreamWindow, "~s1", []byte{0, 0x08, 0, 1})},
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
	if _, err := wire.AppendStreamData(nil, "~s1", make([]byte, wire.LargeStreamData+1)); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("AppendStreamData of too much = %v", err)
	}
	if _, err := wire.AppendFrame(nil, wire.FrameOutput, "t1", make([]byte, wire.MaxFrameData+1)); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("a terminal frame of a stream frame's size = %v", err) // terminal frames keep their own limit
	}
}

// TestInboxWindow: an inbox holds at most its window, in frames of at
// most its Data; what is read comes back as credit in batches of a
// quarter window; the end is io.EOF after the data. Both limit sets, and
// limits set before the first frame.
func TestInboxWindow(t *testing.T) {
	t.Parallel()
	for _, l := range []wire.StreamLimits{wire.DefaultStreamLimits, wire.OfferedStreamLimits} {
		t.Run(fmt.Sprint(l.Data), func(t *testing.T) {
			in := wire.NewInbox(wire.DefaultStreamLimits)
			in.SetLimits(l)
			inboxWindow(t, in, l)
		})
	}
}

func inboxWindow(t *testing.T, in *wire.Inbox, l wire.StreamLimits) {
	if err := in.Push(make([]byte, l.Data+1)); !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), fmt.Sprint("more than ", l.Data)) {
		t.Fatalf("a frame over the limits' data = %v, want ErrBadFrame", err)
	}
	chunk := make([]byte, l.Data)
	for i := 0; i < l.Window/l.Data; i++ {
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
		if c != 0 && c < uint32(l.Window/4) && in.Buffered() > 0 {
			t.Fatalf("credit of %d returned early", c)
		}
		credit += c
	}
	if credit != uint32(l.Window) {
		t.Fatalf("credit returned %d, want %d", credit, l.Window)
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
	in := wire.NewInbox(wire.DefaultStreamLimits)
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
	c := wire.NewCredit(wire.StreamWindow)
	c.SetWindow(wire.LargeStreamWindow)
	c.SetWindow(wire.StreamWindow) // back: what counts is the last
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

// TestNegotiate: a stream uses both sides' offers only when both made
// one; a peer's offer is clamped to what this build handles; an offer
// that breaks the rules is refused.
func TestNegotiate(t *testing.T) {
	t.Parallel()
	mine := wire.OfferedStreamLimits
	cases := []struct {
		name        string
		mine, offer *wire.StreamLimits
		own, peer   wire.StreamLimits
		err         string
	}{
		{"both offered", &mine, &wire.OfferedStreamLimits, mine, wire.OfferedStreamLimits, ""},
		{"the peer offered none (an older build)", &mine, nil, wire.DefaultStreamLimits, wire.DefaultStreamLimits, ""},
		{"we answer a peer that offered none", nil, nil, wire.DefaultStreamLimits, wire.DefaultStreamLimits, ""},
		{"a smaller offer", &mine, &wire.StreamLimits{Data: 1000, Window: 5000}, mine, wire.StreamLimits{Data: 1000, Window: 5000}, ""},
		{"a larger offer is clamped", &mine, &wire.StreamLimits{Data: 16 << 20, Window: 1 << 30}, mine, wire.OfferedStreamLimits, ""},
		{"no data", &mine, &wire.StreamLimits{Data: 0, Window: 5000}, wire.StreamLimits{}, wire.StreamLimits{}, "1 ≤ data ≤ window"},
		{"a window under a frame", &mine, &wire.StreamLimits{Data: 5000, Window: 4999}, wire.StreamLimits{}, wire.StreamLimits{}, "1 ≤ data ≤ window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			own, peer, err := wire.Negotiate(c.mine, c.offer)
			if c.err != "" {
				if !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Negotiate = %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil || own != c.own || peer != c.peer {
				t.Fatalf("Negotiate = %+v, %+v, %v; want %+v, %+v", own, peer, err, c.own, c.peer)
			}
		})
	}
}
