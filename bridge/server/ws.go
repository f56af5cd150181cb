package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/internal/hangup"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/internal/peerhello"
	"github.com/boxwire/boxwire/bridge/threadops"
	"github.com/boxwire/boxwire/bridge/wire"
)

// upgrader makes client connections. An idle connection holds no write
// buffer: each message takes one from wsWriteBuffers and gives it back
// once written. It reads through a reader of its own of wire.ReadBufferSize
// (1 KiB), not the HTTP server's 4 KiB one, which the upgrade would
// otherwise take over and keep for the connection's life.
var upgrader = websocket.Upgrader{ReadBufferSize: wire.ReadBufferSize, WriteBufferSize: 4096, WriteBufferPool: wsWriteBuffers}

// wsWriteBuffers are the write buffers of client connections in use.
var wsWriteBuffers = &sync.Pool{}

// serveWS runs one client connection: hello, thread creation or lookup,
// then the relay until either side ends it. The handshake runs on the
// request's handler goroutine, the relay on a goroutine of its own
// (relay), counted in s.conns like the handler: the handler returns once
// the client is attached, and the HTTP server's state for the request
// (its connection's 4 KiB write buffer, the parsed request, the
// handler's stack) goes with it instead of staying for the connection's
// life.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeInternal, "bridge shutting down")
		return
	}
	a, ok := s.attachWS(w, r)
	if !ok {
		s.conns.Done()
		return
	}
	go a.relay()
}

// attached is a client attached to its thread, for relay.
type attached struct {
	s          *Server
	c          *client
	t          *thread
	endConn    context.CancelFunc // ends c.ctx
	stopRevoke func()
}

// attachWS upgrades the connection, reads the client's hello, finds or
// makes its thread, attaches the client and starts its writer. It reports
// false when the connection ended instead (answered, rejected or
// forwarded to another bridge and served there).
func (s *Server) attachWS(w http.ResponseWriter, r *http.Request) (a attached, ok bool) {
	conn, err := upgrader.Upgrade(wire.TryHijacker{ResponseWriter: w}, r, nil) // client.reply writes on the goroutine that has a reply
	if err != nil {
		return a, false // the upgrader has answered
	}
	s.metrics.Clients.Inc() // GET /metrics (metrics.go)
	c := newClient("c"+strconv.FormatUint(s.connID.Add(1), 10), conn, s.log)
	c.log = s.log.With("conn", c.id, "remote", r.RemoteAddr)
	// The principal (users.go), until the relay ends: it outlives the
	// request's handler, whose context ends when it returns.
	cctx, endConn := context.WithCancel(context.WithoutCancel(r.Context()))
	c.ctx = cctx
	defer func() {
		if !ok {
			endConn()
			s.metrics.Clients.Dec()
		}
	}()

	stopWatch := context.AfterFunc(s.ctx, func() { _ = conn.NetConn().SetReadDeadline(time.Now()) })
	hello, helloEnv, err := peerhello.Read(conn, helloTimeout) // bridge/internal/peerhello
	stopWatch()
	if err != nil {
		c.log.Debug("client hello", "err", err)
		reject(conn, errorFor("", helloEnv.ID, err), websocket.ClosePolicyViolation)
		return a, false
	}
	ctx, stopHangup := hangup.Watch(r.Context(), conn.NetConn()) // bridge/internal/hangup: a client that leaves stops creation
	t, err := onOwnStack(func() (*thread, error) { return s.threadFor(ctx, hello) })
	stopHangup()
	if err != nil && s.forward(r, conn, helloEnv, err) { // another bridge relays the thread (forward.go)
		return a, false
	}
	if err != nil {
		c.log.Warn("attach client", "thread", hello.Thread, "err", err)
		reject(conn, errorFor(hello.Thread, helloEnv.ID, err), closeNormal)
		return a, false
	}
	c.log = c.log.With("thread", t.id)
	if !t.attach(c) {
		reject(conn, wire.ErrorEnvelope(t.id, helloEnv.ID, wire.CodeNotFound, "thread deleted"), closeNormal)
		return a, false
	}
	s.addClient(c)
	c.log.Info("client attached", "after_seq", hello.AfterSeq)
	stopRevoke := s.users.Watch(cctx, func() { // a revoked key's connection ends at once
		c.log.Info("credentials revoked: closing the connection")
		c.kick(websocket.ClosePolicyViolation, "credentials revoked", nil)
	})
	c.startWriter(t, helloAnswer(s.cfg.Software, t, helloEnv.ID, hello.AfterSeq)) // client.go: runs while it has work
	// The audit entry's write (an fsync with bbolt) goes beside the hello
	// answer's, not before it; the relay starts reading after it.
	s.users.Record(cctx, "thread.attach", t.id, "", r.RemoteAddr)
	return attached{s: s, c: c, t: t, endConn: endConn, stopRevoke: stopRevoke}, true
}

// relay reads the attached client's frames until the connection ends,
// then waits for its writer, detaches it and counts it out of s.conns.
func (a attached) relay() {
	s, c, t := a.s, a.c, a.t
	defer s.conns.Done()
	defer s.metrics.Clients.Dec()
	c.readPump(t)
	c.kick(closeNormal, "", nil)
	<-c.pump.Done()
	a.endConn()
	a.stopRevoke()
	t.detach(c)
	s.removeClient(c)
	c.log.Info("client detached")
}

// helloAnswer is what an attached client is sent first: the bridge's
// hello, whose AfterSeq is the seq the events that follow come after. A
// client's after_seq beyond the thread's last event (a log it never saw)
// would miss every event up to it, so the events then follow from the log's
// end, and an error of code seq_ahead (answering the hello) says so. The
// client is attached already: no event committed after this is missed.
func helloAnswer(software string, t *thread, helloID string, afterSeq uint64) greeting {
	g := greeting{afterSeq: afterSeq}
	if last := t.committedSeq(); afterSeq > last {
		g.afterSeq = last
		ahead := wire.ErrorEnvelope(t.id, helloID, wire.CodeSeqAhead,
			"after_seq %d is ahead of the log (last seq %d): events follow from seq %d", afterSeq, last, last+1)
		g.then = &ahead
	}
	g.hello = wire.MustNew(wire.TypeHello, t.id, helloID, wire.Hello{
		Version: wire.Version, Role: wire.RoleBridge, Software: software, Thread: t.id, AfterSeq: g.afterSeq,
	})
	return g
}

// threadFor finds the thread a client's hello names, or creates one when it
// names none. Creation stops when ctx or the server ends.
func (s *Server) threadFor(ctx context.Context, hello wire.Hello) (*thread, error) {
	if hello.Thread != "" {
		if s.users.Hidden(ctx, hello.Thread) {
			// Another user's thread is answered as one that does not exist.
			return nil, wire.Error{Code: wire.CodeNotFound, Message: fmt.Sprintf("thread %q not found", hello.Thread)}
		}
		if t := s.lookup(hello.Thread); t != nil {
			return t, nil
		}
		if t, found, err := s.resumeThread(ctx, hello.Thread); found { // suspend.go
			return t, err
		}
		return nil, wire.Error{Code: wire.CodeNotFound, Message: fmt.Sprintf("thread %q not found", hello.Thread)}
	}
	ctx, cancel := s.untilClose(ctx)
	defer cancel()
	return s.createThread(ctx, wire.CreateThread{})
}

// onOwnStack runs f on a goroutine of its own and waits for it. Creating
// a thread calls deep (the engine's API, JSON, the store) and grows the
// stack of the goroutine it runs on to tens of KiB; the connection's
// handler goroutine then idles for hours with that stack, one per
// connection. On a goroutine that ends, the stack goes with it.
func onOwnStack[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err = f()
	}()
	<-done
	return v, err
}

// errorFor turns a handshake failure into the error a client is sent
// (threadops.WireError).
func errorFor(thread, id string, err error) wire.Envelope {
	werr := threadops.WireError(err)
	return wire.ErrorEnvelope(thread, id, werr.Code, "%s", werr.Message)
}

// enter counts a new connection handler unless the server is closing.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns.Add(1)
	return true
}

// addClient tracks an attached client so Close can close it.
func (s *Server) addClient(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.kick(closeGoingAway, "bridge shutting down", nil)
		return
	}
	s.clients[c] = struct{}{}
}

func (s *Server) removeClient(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, c)
}
