package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Defaults of Config.
const (
	// DefaultMaxStreams bounds one connection's open streams.
	DefaultMaxStreams = 512
	// DefaultIdle closes a stream that carried nothing either way this long.
	DefaultIdle = 30 * time.Minute
	// dialWait bounds connecting to a port.
	dialWait = 5 * time.Second
)

// Out is the connection's queue for stream traffic, in order: control
// messages (Send) and frames (Offer, which refuses while the queue is
// full; Watch and Unwatch wake a producer when it may have room). A
// *wire.Queue[wire.Envelope] is one.
type Out interface {
	Send(env wire.Envelope) bool
	Offer(frame []byte) bool
	Watch(w *wire.Waker)
	Unwatch(w *wire.Waker)
}

// Config configures a Mux. Zero values mean defaults.
type Config struct {
	// Thread names the connection's thread in the messages it sends.
	Thread string
	// MaxStreams bounds the open streams; default DefaultMaxStreams.
	MaxStreams int
	// Idle closes a stream idle this long; default DefaultIdle.
	Idle time.Duration
	// Tables are read for port_list (ports.go).
	Tables Tables
	// Dial connects to the sandbox's own port; default DialLoopback. Tests
	// replace it; the agent never does.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// NoStreamLimits answers port_open as a build before
	// wire.StreamLimits did: without offering limits, every stream at
	// wire.DefaultStreamLimits. For tests of mixed versions; the agent
	// never sets it.
	NoStreamLimits bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Mux serves the streams of one connection. Handle and Frame are called
// by the connection's reader, one at a time, and never block; Close may
// be called from anywhere.
type Mux struct {
	cfg Config
	out Out
	log *slog.Logger
	ctx context.Context // ends with Close: every stream ends
	end context.CancelFunc
	wg  sync.WaitGroup // the streams' goroutines

	mu      sync.Mutex
	closed  bool
	streams map[string]*stream
}

// New returns a Mux that queues its traffic on out.
func New(cfg Config, out Out) *Mux {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Dial == nil {
		cfg.Dial = DialLoopback
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, end := context.WithCancel(context.Background())
	return &Mux{cfg: cfg, out: out, log: cfg.Logger, ctx: ctx, end: end, streams: map[string]*stream{}}
}

// DialLoopback connects to port on 127.0.0.1 and, when nothing listens
// there, on ::1: the sandbox's own loopback, the only place streams go.
func DialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: dialWait}
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err == nil {
		return c, nil
	}
	if c6, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err6 == nil {
		return c6, nil
	}
	return nil, err
}

// Close ends every stream (their TCP connections close) and waits for
// their goroutines. Later port_open requests are refused. Idempotent.
func (m *Mux) Close() {
	m.mu.Lock()
	m.closed = true
	open := m.streams
	m.streams = map[string]*stream{}
	m.mu.Unlock()
	m.end()
	for _, st := range open {
		st.abort(errMuxClosed)
	}
	m.wg.Wait()
}

// Handle serves one stream control message: port_open, stream_close or
// port_list. It does not block.
func (m *Mux) Handle(env wire.Envelope) {
	switch env.Type {
	case wire.TypePortOpen:
		m.open(env)
	case wire.TypeStreamClose:
		var c wire.StreamClose
		if err := env.Decode(&c); err != nil {
			m.send(wire.ErrorEnvelope(m.cfg.Thread, env.ID, wire.CodeBadMessage, "%v", err))
			return
		}
		if st := m.take(c.Stream); st != nil {
			st.abort(errPeerClosed)
		}
	case wire.TypePortList:
		ports, err := Listening(m.cfg.Tables)
		if err != nil {
			m.send(wire.ErrorEnvelope(m.cfg.Thread, env.ID, wire.CodeInternal, "%v", err))
			return
		}
		m.send(wire.MustNew(wire.TypePorts, m.cfg.Thread, env.ID, wire.Ports{Ports: ports}))
	default:
		m.send(wire.ErrorEnvelope(m.cfg.Thread, env.ID, wire.CodeBadMessage, "%q is not a stream request", env.Type))
	}
}

// Frame takes one stream frame from the peer. Frames of a stream that is
// not open (it just ended) are dropped; a frame that breaks the window
// closes its stream with bad_message. It does not block.
func (m *Mux) Frame(f wire.Frame) {
	m.mu.Lock()
	st := m.streams[f.Session]
	m.mu.Unlock()
	if st == nil {
		return
	}
	if err := f.Take(st.in, st.credit); err != nil {
		m.fail(st, wire.CodeBadMessage, err.Error())
		return
	}
	st.touch()
}

// errPeerClosed ends a stream the peer closed.
var errPeerClosed = errors.New("stream closed by the peer")

// errMuxClosed ends the streams of a connection that ended.
var errMuxClosed = errors.New("the connection ended")

// open starts a stream for a port_open.
func (m *Mux) open(env wire.Envelope) {
	var p wire.PortOpen
	if err := env.Decode(&p); err != nil {
		m.send(wire.ErrorEnvelope(m.cfg.Thread, env.ID, wire.CodeBadMessage, "%v", err))
		return
	}
	refuse := func(code wire.Code, format string, args ...any) {
		m.send(wire.MustNew(wire.TypeStreamClose, m.cfg.Thread, env.ID, wire.StreamClose{Stream: p.Stream, Code: code, Message: fmt.Sprintf(format, args...)}))
	}
	switch {
	case p.Stream == "" || len(p.Stream) > wire.MaxStreamID:
		refuse(wire.CodeBadMessage, "port_open: a stream id of 1 to %d bytes is required", wire.MaxStreamID)
		return
	case p.Port < 1 || p.Port > 65535:
		refuse(wire.CodeBadMessage, "port_open: port %d is not 1 to 65535", p.Port)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		refuse(wire.CodeInternal, "the connection is closing")
		return
	case m.streams[p.Stream] != nil:
		refuse(wire.CodeBadMessage, "stream %q is already open", p.Stream)
		return
	case len(m.streams) >= m.cfg.MaxStreams:
		refuse(wire.CodeStreamLimit, "this connection already has its maximum of %d open streams", m.cfg.MaxStreams)
		return
	}
	var mine *wire.StreamLimits
	if p.Limits != nil && !m.cfg.NoStreamLimits {
		mine = &wire.OfferedStreamLimits
	}
	own, peer, err := wire.Negotiate(mine, p.Limits)
	if err != nil {
		refuse(wire.CodeBadMessage, "port_open: %v", err)
		return
	}
	st := newStream(m, p.Stream, p.Port, env.ID, mine, own, peer)
	m.streams[p.Stream] = st
	m.wg.Add(1)
	go st.run()
}

// take removes and returns the open stream id, or nil.
func (m *Mux) take(id string) *stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.streams[id]
	delete(m.streams, id)
	return st
}

// remove forgets st if it is still the open stream of its id.
func (m *Mux) remove(st *stream) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.streams[st.id] != st {
		return false
	}
	delete(m.streams, st.id)
	return true
}

// fail ends st with an error the peer is told.
func (m *Mux) fail(st *stream, code wire.Code, msg string) {
	if m.remove(st) {
		m.log.Debug("stream failed", "stream", st.id, "port", st.port, "code", code, "err", msg)
		m.send(wire.MustNew(wire.TypeStreamClose, m.cfg.Thread, "", wire.StreamClose{Stream: st.id, Code: code, Message: msg}))
	}
	st.abort(errors.New(msg))
}

// send queues a control message; a queue that is full means the
// connection is too slow, and its owner drops it.
func (m *Mux) send(env wire.Envelope) {
	if !m.out.Send(env) {
		m.log.Debug("stream message not queued", "type", env.Type)
	}
}

// offer queues frame, waiting while the queue is full until it has room
// or done closes; false means done closed.
func (m *Mux) offer(frame []byte, done <-chan struct{}) bool {
	if m.out.Offer(frame) {
		return true
	}
	w := wire.NewWaker()
	m.out.Watch(w)
	defer m.out.Unwatch(w)
	for !m.out.Offer(frame) {
		select {
		case <-w.C():
		case <-done:
			return false
		}
	}
	return true
}
