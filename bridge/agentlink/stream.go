package agentlink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Stream is one open stream to a port in the sandbox, as a net.Conn. Its
// Read and Write may be called by one reader and one writer at a time
// (as net.Conn's users do), Close and the deadlines from anywhere. Read
// blocks until the sandbox sends bytes or ends its direction (io.EOF),
// the stream ends, or the read deadline passes; Write blocks while the
// sandbox's side gave no credit (its program does not read), until the
// write deadline.
type Stream struct {
	s    *Streams
	id   string
	port int

	in     *wire.Inbox  // from the agent
	credit *wire.Credit // what Write may still send
	data   int          // the most bytes of a data frame to the agent (agree)
	rd, wd wire.Deadline
	done   chan struct{} // closed when the stream ended
	wmu    sync.Mutex    // one Write or CloseWrite at a time

	mu      sync.Mutex
	err     error // why it ended
	wclosed bool  // CloseWrite sent the end of our direction
}

// newStream makes a stream that offers the agent wire.OfferedStreamLimits;
// agree sets what was agreed once the agent answers.
func newStream(s *Streams, id string, port int) *Stream {
	return &Stream{s: s, id: id, port: port, in: wire.NewInbox(wire.OfferedStreamLimits),
		credit: wire.NewCredit(wire.StreamWindow), data: wire.MaxStreamData, done: make(chan struct{})}
}

// agree applies the limits the agent's port_opened offered (nil: none,
// an agent before them), before any of its data frames is read, and
// before Write. An offer that breaks the rules fails the stream.
func (st *Stream) agree(offer *wire.StreamLimits) {
	own, peer, err := wire.Negotiate(&wire.OfferedStreamLimits, offer)
	if err != nil {
		st.fail(wire.CodeBadMessage, err.Error())
		return
	}
	st.in.SetLimits(own)
	st.credit.SetWindow(peer.Window)
	st.data = peer.Data
}

// Port is the sandbox port the stream reaches.
func (st *Stream) Port() int { return st.port }

// Read reads what the program in the sandbox sent.
func (st *Stream) Read(p []byte) (int, error) {
	n, credit, err := st.in.Read(p, st.rd.Done())
	if credit > 0 {
		if frame, ferr := wire.AppendStreamWindow(nil, st.id, credit); ferr == nil {
			st.offer(frame, nil)
		}
	}
	return n, err
}

// Write sends p to the program in the sandbox, in frames within the
// stream's credit.
func (st *Stream) Write(p []byte) (int, error) {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	ended, wclosed := st.err, st.wclosed
	st.mu.Unlock()
	if ended != nil {
		return 0, ended
	}
	if wclosed {
		return 0, fmt.Errorf("write to port %d after CloseWrite: %w", st.port, net.ErrClosed)
	}
	written := 0
	for written < len(p) {
		n, err := st.credit.Take(min(len(p)-written, st.data), st.wd.Done())
		if err != nil {
			return written, err
		}
		frame, err := wire.AppendStreamData(nil, st.id, p[written:written+n])
		if err != nil {
			return written, err
		}
		if err := st.offer(frame, st.wd.Done()); err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// CloseWrite ends the stream's direction towards the sandbox: the
// program reads the end of its input; what it sends still arrives.
func (st *Stream) CloseWrite() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	already := st.wclosed
	st.wclosed = true
	st.mu.Unlock()
	if already {
		return nil
	}
	frame, _ := wire.AppendStreamData(nil, st.id, nil)
	return st.offer(frame, nil)
}

// offer queues frame towards the agent, waiting for room in the queue
// until the stream ends or deadline closes.
func (st *Stream) offer(frame []byte, deadline <-chan struct{}) error {
	q := st.s.queue()
	if q.Offer(frame) {
		return nil
	}
	w := wire.NewWaker()
	q.Watch(w)
	defer q.Unwatch(w)
	for !q.Offer(frame) {
		select {
		case <-w.C():
		case <-st.done:
			return st.failure()
		case <-deadline:
			return os.ErrDeadlineExceeded
		}
	}
	return nil
}

// failure is why the stream ended.
func (st *Stream) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		return net.ErrClosed
	}
	return st.err
}

// Close ends the stream both ways and tells the agent, which closes its
// TCP connection. Idempotent.
func (st *Stream) Close() error {
	if st.end(net.ErrClosed) {
		st.s.queue().Send(wire.MustNew(wire.TypeStreamClose, "", "", wire.StreamClose{Stream: st.id}))
	}
	return nil
}

// fail ends the stream with an error the agent is told.
func (st *Stream) fail(code wire.Code, msg string) {
	if st.end(wire.Error{Code: code, Message: msg}) {
		st.s.queue().Send(wire.MustNew(wire.TypeStreamClose, "", "", wire.StreamClose{Stream: st.id, Code: code, Message: msg}))
	}
}

// drop ends the stream without telling the agent (it ended it, or is gone).
func (st *Stream) drop(err error) { st.end(err) }

// end ends the stream with err and forgets it; it reports whether this
// call ended it.
func (st *Stream) end(err error) bool {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return false
	}
	st.err = err
	close(st.done)
	st.mu.Unlock()
	st.s.mu.Lock()
	if st.s.open[st.id] == st {
		delete(st.s.open, st.id)
	}
	st.s.mu.Unlock()
	if errors.Is(err, errStreamEnded) {
		_ = st.in.Push(nil) // what the sandbox sent before its close stays readable, then EOF
	} else {
		st.in.Abort(err)
	}
	st.credit.Abort(err)
	return true
}

// LocalAddr names the bridge's side of the stream.
func (st *Stream) LocalAddr() net.Addr { return streamAddr("bridge/" + st.id) }

// RemoteAddr names the sandbox port.
func (st *Stream) RemoteAddr() net.Addr {
	return streamAddr("sandbox:127.0.0.1:" + strconv.Itoa(st.port))
}

// SetDeadline sets both deadlines.
func (st *Stream) SetDeadline(t time.Time) error {
	st.rd.Set(t)
	st.wd.Set(t)
	return nil
}

// SetReadDeadline sets the read deadline.
func (st *Stream) SetReadDeadline(t time.Time) error { st.rd.Set(t); return nil }

// SetWriteDeadline sets the write deadline.
func (st *Stream) SetWriteDeadline(t time.Time) error { st.wd.Set(t); return nil }

// streamAddr is a Stream's net.Addr.
type streamAddr string

func (a streamAddr) Network() string { return "boxwire-stream" }
func (a streamAddr) String() string  { return string(a) }

var _ net.Conn = (*Stream)(nil)
