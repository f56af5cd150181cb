package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// A forwarded client (forward.go; docs/store.md, "Forwarding") has three
// goroutines, all owned by serve: the connection's handler reads the
// client's frames and writes them to the upstream (readPump); writePump is
// the only writer of the client's connection: the hello, the thread's
// events read from the store by cursor, the frames the relay passed on,
// pings; relay runs the upstream — reads it, passes on what is not an
// event, and dials the next one when it ends.

const (
	// relayRetry is how often a forwarded client's bridge looks for the
	// thread's relay while it has none.
	relayRetry = 500 * time.Millisecond
	// upstreamWait bounds how long a forwarded client's request waits for
	// an upstream before it is answered sandbox_unavailable.
	upstreamWait = 30 * time.Second
	// storeRetry is how soon a forwarded client's writer reads the store
	// again after a read failed.
	storeRetry = time.Second
	// drainBatches bounds the events a forwarded client's writer reads
	// before a close it passes on (the thread's final events).
	drainBatches = 64
)

// frame is one message passed to a forwarded client as it is.
type frame struct {
	typ  int
	data []byte
}

// forwarded is one forwarded client connection.
type forwarded struct {
	s       *Server
	thread  string
	conn    *websocket.Conn // the client's: writePump writes, readPump reads
	log     *slog.Logger
	hello   wire.Hello // the client's
	helloID string
	auth    http.Header // the client's Authorization, for dialling the upstream

	out  chan frame    // for the writer: replies and terminal output of the relay, and this bridge's answers
	wake chan struct{} // cap 1: the store has new events of the thread

	ctx       context.Context // ends with kick, or the server
	cancel    context.CancelFunc
	stop      chan struct{} // closed once by kick
	once      sync.Once
	closeCode int
	closeText string
	drain     bool // read the store to the thread's end before the close frame

	mu      sync.Mutex
	up      *websocket.Conn // the upstream; nil while there is none
	upReady chan struct{}   // closed once up is set
}

func newForwarded(s *Server, conn *websocket.Conn, hello wire.Hello, helloID string, h http.Header, log *slog.Logger) *forwarded {
	auth := http.Header{}
	if a := h.Get("Authorization"); a != "" {
		auth.Set("Authorization", a)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	return &forwarded{s: s, thread: hello.Thread, conn: conn, log: log, hello: hello, helloID: helloID, auth: auth,
		out: make(chan frame, clientSendBuffer), wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, stop: make(chan struct{}), upReady: make(chan struct{})}
}

// kick has the writer end the connection with code and text (after the
// thread's remaining events when drain); only the first call counts.
func (f *forwarded) kick(code int, text string, drain bool) {
	f.once.Do(func() {
		f.closeCode, f.closeText, f.drain = code, text, drain
		close(f.stop)
		f.cancel()
	})
}

// wakeUp tells the writer the store has new events, without blocking.
func (f *forwarded) wakeUp() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// pass queues a frame for the client, waiting (at most writeWait) while
// the queue is full — the upstream is not read meanwhile, so the relay
// sees a slow client — and drops a client that takes nothing for that
// long (1013, as an attached client is dropped: client.enqueue).
func (f *forwarded) pass(fr frame) {
	select {
	case f.out <- fr:
		return
	default:
	}
	timer := time.NewTimer(writeWait)
	defer timer.Stop()
	select {
	case f.out <- fr:
	case <-f.stop:
	case <-timer.C:
		f.log.Warn("dropping slow forwarded client", "queued", len(f.out))
		f.kick(closeTooSlow, "client too slow: reconnect with after_seq", false)
	}
}

// answer queues env for the client.
func (f *forwarded) answer(env wire.Envelope) {
	if data, err := json.Marshal(env); err == nil {
		f.pass(frame{typ: websocket.TextMessage, data: data})
	}
}

// run serves the client with up as its first upstream until either side
// or the server ends; it returns once its goroutines have.
func (f *forwarded) run(up *websocket.Conn) {
	defer f.cancel()
	g := f.greeting()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		f.writePump(g)
	}()
	go func() {
		defer wg.Done()
		f.relay(up)
	}()
	stopWatch := context.AfterFunc(f.ctx, func() { // the server closes: the reader must not wait for the client
		f.kick(closeGoingAway, "bridge shutting down", false)
		_ = f.conn.NetConn().SetReadDeadline(time.Now())
	})
	defer stopWatch()
	f.readPump()
	f.kick(closeNormal, "", false)
	wg.Wait()
}

// greeting is the client's hello answer as the relay would give it, from
// the stored log: its after_seq, or the log's end and seq_ahead.
func (f *forwarded) greeting() greeting {
	g := greeting{afterSeq: f.hello.AfterSeq}
	if last, err := f.s.db.LastSeq(f.thread); err == nil && g.afterSeq > last {
		ahead := wire.ErrorEnvelope(f.thread, f.helloID, wire.CodeSeqAhead,
			"after_seq %d is ahead of the log (last seq %d): events follow from seq %d", g.afterSeq, last, last+1)
		g.afterSeq, g.then = last, &ahead
	}
	g.hello = wire.MustNew(wire.TypeHello, f.thread, f.helloID,
		wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Software: f.s.cfg.Software, Thread: f.thread, AfterSeq: g.afterSeq})
	return g
}

// writePump writes the greeting, then the thread's events from the store
// after the cursor — a batch at a time, again whenever the store tells of
// new ones — interleaved with the frames passed on and pings, until
// kicked or a write fails. It closes the connection when it returns.
func (f *forwarded) writePump(g greeting) {
	defer f.conn.Close()
	w := wire.Writer{Conn: f.conn, Wait: writeWait}
	for _, env := range []*wire.Envelope{&g.hello, g.then} {
		if env != nil && w.JSON(*env) != nil {
			return
		}
	}
	cursor := g.afterSeq
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	var retry <-chan time.Time
	more := true
	for {
		wake := f.wake
		if more && retry == nil {
			n, readErr, err := f.writeEvents(w, &cursor)
			if err != nil {
				return
			}
			if readErr != nil {
				f.log.Warn("forwarded client: read events from the store", "after", cursor, "err", readErr)
				retry = time.After(storeRetry)
			}
			if more = n >= replayBatch; more {
				wake = closedWake
			}
		}
		select {
		case <-wake:
			more = true
		case <-retry:
			retry, more = nil, true
		case fr := <-f.out:
			if w.Message(fr.typ, fr.data) != nil {
				return
			}
		case <-ticker.C:
			if w.Ping() != nil {
				return
			}
		case <-f.stop:
			for i := 0; f.drain && i < drainBatches; i++ {
				if n, readErr, err := f.writeEvents(w, &cursor); n == 0 || readErr != nil || err != nil {
					break
				}
			}
			_ = w.Close(f.closeCode, f.closeText)
			return
		}
	}
}

// writeEvents writes the next batch of stored events after cursor; n is
// how many it read, readErr the store's failure, err the connection's.
func (f *forwarded) writeEvents(w wire.Writer, cursor *uint64) (n int, readErr, err error) {
	evs, readErr := f.s.db.Events(f.thread, *cursor, replayBatch)
	for _, env := range evs {
		if env.Seq <= *cursor {
			continue
		}
		if err := w.JSON(env); err != nil {
			return len(evs), readErr, err
		}
		*cursor = env.Seq
	}
	return len(evs), readErr, nil
}

// readPump reads the client's frames and sends each to the upstream
// (toRelay) until the connection fails or is closed.
func (f *forwarded) readPump() {
	_ = f.conn.SetReadDeadline(time.Now().Add(pongWait))
	f.conn.SetPongHandler(func(string) error { return f.conn.SetReadDeadline(time.Now().Add(pongWait)) })
	f.conn.SetReadLimit(hardFrameBytes) // above it: close 1009, as for attached clients
	for {
		typ, data, err := f.conn.ReadMessage()
		if err != nil {
			f.log.Debug("forwarded client's connection ended", "err", err)
			return
		}
		f.toRelay(typ, data)
	}
}

// toRelay writes one frame of the client to the upstream, waiting for
// one (at most upstreamWait) while there is none; a request that cannot
// be sent is answered sandbox_unavailable.
func (f *forwarded) toRelay(typ int, data []byte) {
	if up := f.awaitUpstream(); up != nil {
		_ = up.SetWriteDeadline(time.Now().Add(writeWait))
		if up.WriteMessage(typ, data) == nil {
			return
		}
	}
	if typ != websocket.TextMessage { // input of a terminal that ended with its relay
		return
	}
	var env wire.Envelope
	_ = json.Unmarshal(data, &env)
	f.answer(wire.ErrorEnvelope(f.thread, env.ID, wire.CodeSandboxUnavailable,
		"no bridge relays thread %s right now (it is moving to another bridge): send the request again", f.thread))
}
