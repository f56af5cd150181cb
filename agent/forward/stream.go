package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// stream is one open stream: its TCP connection, once dialled, and the
// flow control of both directions.
type stream struct {
	m      *Mux
	id     string
	port   int
	openID string // the port_open's id, carried back by port_opened

	offer  *wire.StreamLimits // what port_opened offers the peer (nil: nothing)
	in     *wire.Inbox        // from the peer, towards the TCP connection
	credit *wire.Credit       // what the TCP connection's bytes may use
	own    int                // the most bytes of a data frame from the peer
	data   int                // the most bytes of a data frame to the peer
	ctx    context.Context
	cancel context.CancelFunc
	last   atomic.Int64 // unix nanos of the last byte either way

	mu   sync.Mutex
	conn net.Conn // set once dialled
	err  error    // why it ended, once aborted
}

// newStream makes the stream a port_open asked for: offer is what its
// port_opened will offer, own and peer the limits agreed (wire.Negotiate).
func newStream(m *Mux, id string, port int, openID string, offer *wire.StreamLimits, own, peer wire.StreamLimits) *stream {
	ctx, cancel := context.WithCancel(m.ctx)
	st := &stream{m: m, id: id, port: port, openID: openID, offer: offer,
		in: wire.NewInbox(own), credit: wire.NewCredit(peer.Window), own: own.Data, data: peer.Data, ctx: ctx, cancel: cancel}
	st.touch()
	return st
}

func (st *stream) touch() { st.last.Store(time.Now().UnixNano()) }

// abort ends the stream: both directions stop and the TCP connection
// closes. The first error is kept.
func (st *stream) abort(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	conn := st.conn
	st.mu.Unlock()
	st.in.Abort(err)
	st.credit.Abort(err)
	st.cancel()
	if conn != nil {
		_ = conn.Close()
	}
}

// run dials, answers port_opened, carries both directions until they end
// or the stream is aborted, and says stream_close. It runs on a goroutine
// counted in the Mux's WaitGroup.
func (st *stream) run() {
	m := st.m
	defer m.wg.Done()
	defer st.cancel()
	conn, err := m.cfg.Dial(st.ctx, st.port)
	if err != nil {
		if m.remove(st) {
			m.send(wire.MustNew(wire.TypeStreamClose, m.cfg.Thread, st.openID, wire.StreamClose{Stream: st.id, Code: wire.CodePortClosed, Message: portError(st.port, err)}))
		}
		return
	}
	st.mu.Lock()
	aborted := st.err != nil
	st.conn = conn
	st.mu.Unlock()
	if aborted {
		_ = conn.Close()
		return
	}
	m.send(wire.MustNew(wire.TypePortOpened, m.cfg.Thread, st.openID, wire.StreamRef{Stream: st.id, Limits: st.offer}))
	idle := time.AfterFunc(m.cfg.Idle, st.checkIdle)
	defer idle.Stop()
	var wg sync.WaitGroup
	wg.Go(func() { st.upload(conn) })
	st.download(conn)
	wg.Wait()
	_ = conn.Close()
	if m.remove(st) { // not closed by the peer or failed: say it ended
		m.send(wire.MustNew(wire.TypeStreamClose, m.cfg.Thread, "", wire.StreamClose{Stream: st.id}))
	}
}

// portError says why a port could not be reached, for a person.
func portError(port int, err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Sprintf("nothing listens on port %d in the sandbox (127.0.0.1 and ::1 refused the connection)", port)
	}
	return fmt.Sprintf("port %d in the sandbox: %v", port, err)
}

// checkIdle closes the stream when it carried nothing for the idle limit,
// else looks again when it could next be.
func (st *stream) checkIdle() {
	if st.ctx.Err() != nil {
		return
	}
	idle := time.Since(time.Unix(0, st.last.Load()))
	if left := st.m.cfg.Idle - idle; left > 0 {
		time.AfterFunc(left, st.checkIdle)
		return
	}
	st.m.fail(st, wire.CodeIdle, fmt.Sprintf("stream idle for %s: closed", st.m.cfg.Idle))
}

// upload writes what the peer sent to conn, returning credit as it takes
// it, and shuts conn's writing down at the peer's end.
func (st *stream) upload(conn net.Conn) {
	buf := make([]byte, st.own)
	for {
		n, credit, err := st.in.Read(buf, st.ctx.Done())
		if credit > 0 {
			frame, _ := wire.AppendStreamWindow(nil, st.id, credit)
			if !st.m.offer(frame, st.ctx.Done()) {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return
		}
		if err != nil {
			return
		}
		if _, err := conn.Write(buf[:n]); err != nil {
			st.m.fail(st, wire.CodeInternal, fmt.Sprintf("write to port %d: %v", st.port, err))
			return
		}
		st.touch()
	}
}

// download reads conn within the credit the peer gave and queues its
// bytes as data frames, then an empty one at conn's end.
func (st *stream) download(conn net.Conn) {
	buf := make([]byte, st.data)
	for {
		n, err := st.credit.Take(len(buf), st.ctx.Done())
		if err != nil {
			return
		}
		k, rerr := conn.Read(buf[:n])
		if k < n {
			_ = st.credit.Add(uint32(n - k)) // what the read did not use
		}
		if k > 0 {
			st.touch()
			frame, _ := wire.AppendStreamData(nil, st.id, buf[:k])
			if !st.m.offer(frame, st.ctx.Done()) {
				return
			}
		}
		if errors.Is(rerr, io.EOF) {
			frame, _ := wire.AppendStreamData(nil, st.id, nil)
			st.m.offer(frame, st.ctx.Done())
			return
		}
		if rerr != nil {
			if st.ctx.Err() == nil {
				st.m.fail(st, wire.CodeInternal, fmt.Sprintf("read from port %d: %v", st.port, rerr))
			}
			return
		}
	}
}
