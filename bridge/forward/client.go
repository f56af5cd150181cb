package forward

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

// A Client has three goroutines, all owned by Hub.Serve: the
// connection's handler reads the client's frames and writes them to the
// upstream (readPump); writePump is the only writer of the client's
// connection: the hello, the thread's events read from the store by
// cursor, the frames the relay passed on, pings; relay runs the upstream
// — reads it, passes on what is not an event, and dials the next one
// when it ends.

const (
	// relayRetry is how often a client's bridge looks for the thread's
	// relay while it has none.
	relayRetry = 500 * time.Millisecond
	// upstreamWait bounds how long a client's request waits for an
	// upstream before it is answered sandbox_unavailable.
	upstreamWait = 30 * time.Second
	// storeRetry is how soon a client's writer reads the store again
	// after a read failed.
	storeRetry = time.Second
	// drainBatches bounds the events a client's writer reads before a
	// close it passes on (the thread's final events).
	drainBatches = 64
)

// frame is one message passed to a client as it is.
type frame struct {
	typ  int
	data []byte
}

// Client is one forwarded client connection (NewClient, Hub.Serve).
type Client struct {
	h       *Hub
	lim     Limits
	thread  string
	conn    *websocket.Conn // the client's: writePump writes, readPump reads
	log     *slog.Logger
	hello   wire.Hello // the client's
	helloID string
	auth    http.Header // the client's Authorization, for dialling the upstream

	out  chan frame    // for the writer: replies and terminal output of the relay, and this bridge's answers
	wake chan struct{} // cap 1: the store has new events of the thread

	ctx       context.Context // ends with kick, or the Hub's context
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

// NewClient makes the forwarded client of conn, whose hello (with id
// helloID) named a thread another bridge relays; header is the client's
// credential to send to the relay (web.RelayCredential: its
// Authorization, or a browser's session cookie; the bridges share the
// store's keys and browser sessions). Dial its first upstream, then
// Serve it.
func (h *Hub) NewClient(conn *websocket.Conn, hello wire.Hello, helloID string, header http.Header, log *slog.Logger) *Client {
	auth := header.Clone()
	if log == nil {
		log = h.log
	}
	ctx, cancel := context.WithCancel(h.ctx)
	return &Client{h: h, lim: h.cfg.Limits, thread: hello.Thread, conn: conn, log: log, hello: hello, helloID: helloID, auth: auth,
		out: make(chan frame, h.cfg.Limits.SendBuffer), wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, stop: make(chan struct{}), upReady: make(chan struct{})}
}

// Revoke closes the client's connection at once (1008): its credential
// was revoked.
func (c *Client) Revoke() {
	c.log.Info("credentials revoked: closing the forwarded connection")
	c.kick(websocket.ClosePolicyViolation, "credentials revoked", false)
}

// kick has the writer end the connection with code and text (after the
// thread's remaining events when drain); only the first call counts.
func (c *Client) kick(code int, text string, drain bool) {
	c.once.Do(func() {
		c.closeCode, c.closeText, c.drain = code, text, drain
		close(c.stop)
		c.cancel()
	})
}

// wakeUp tells the writer the store has new events, without blocking.
func (c *Client) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pass queues a frame for the client, waiting (at most writeWait) while
// the queue is full — the upstream is not read meanwhile, so the relay
// sees a slow client — and drops a client that takes nothing for that
// long (1013, as an attached client is dropped: client.enqueue).
func (c *Client) pass(fr frame) {
	select {
	case c.out <- fr:
		return
	default:
	}
	timer := time.NewTimer(c.lim.WriteWait)
	defer timer.Stop()
	select {
	case c.out <- fr:
	case <-c.stop:
	case <-timer.C:
		c.log.Warn("dropping slow forwarded client", "queued", len(c.out))
		c.kick(websocket.CloseTryAgainLater, "client too slow: reconnect with after_seq", false)
	}
}

// answer queues env for the client.
func (c *Client) answer(env wire.Envelope) {
	if data, err := json.Marshal(env); err == nil {
		c.pass(frame{typ: websocket.TextMessage, data: data})
	}
}

// run serves the client with up as its first upstream until either side
// or the Hub ends; it returns once its goroutines have.
func (c *Client) run(up *websocket.Conn) {
	defer c.cancel()
	g := c.greeting()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.writePump(g)
	}()
	go func() {
		defer wg.Done()
		c.relay(up)
	}()
	stopWatch := context.AfterFunc(c.ctx, func() { // the bridge closes: the reader must not wait for the client
		c.kick(websocket.CloseGoingAway, "bridge shutting down", false)
		_ = c.conn.NetConn().SetReadDeadline(time.Now())
	})
	defer stopWatch()
	c.readPump()
	c.kick(websocket.CloseNormalClosure, "", false)
	wg.Wait()
}

// greeting is what the writer sends first: hello, then (if set) then;
// the events that follow come after afterSeq.
type greeting struct {
	hello    wire.Envelope
	then     *wire.Envelope
	afterSeq uint64
}

// closedWake is always ready: the writer selects on it to take other work
// between batches of events without waiting.
var closedWake = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// greeting is the client's hello answer as the relay would give it, from
// the stored log: its after_seq, or the log's end and seq_ahead.
func (c *Client) greeting() greeting {
	g := greeting{afterSeq: c.hello.AfterSeq}
	if last, err := c.h.cfg.Store.LastSeq(c.thread); err == nil && g.afterSeq > last {
		ahead := wire.ErrorEnvelope(c.thread, c.helloID, wire.CodeSeqAhead,
			"after_seq %d is ahead of the log (last seq %d): events follow from seq %d", g.afterSeq, last, last+1)
		g.afterSeq, g.then = last, &ahead
	}
	g.hello = wire.MustNew(wire.TypeHello, c.thread, c.helloID,
		wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Software: c.h.cfg.Software, Thread: c.thread, AfterSeq: g.afterSeq})
	return g
}

// writePump writes the greeting, then the thread's events from the store
// after the cursor — a batch at a time, again whenever the store tells of
// new ones — interleaved with the frames passed on and pings, until
// kicked or a write fails. It closes the connection when it returns.
func (c *Client) writePump(g greeting) {
	defer c.conn.Close()
	w := wire.Writer{Conn: c.conn, Wait: c.lim.WriteWait}
	for _, env := range []*wire.Envelope{&g.hello, g.then} {
		if env != nil && w.JSON(*env) != nil {
			return
		}
	}
	cursor := g.afterSeq
	ticker := time.NewTicker(c.lim.PingPeriod)
	defer ticker.Stop()
	var retry <-chan time.Time
	more := true
	for {
		wake := c.wake
		if more && retry == nil {
			n, readErr, err := c.writeEvents(w, &cursor)
			if err != nil {
				return
			}
			if readErr != nil {
				c.log.Warn("forwarded client: read events from the store", "after", cursor, "err", readErr)
				retry = time.After(storeRetry)
			}
			if more = n >= c.lim.Batch; more {
				wake = closedWake
			}
		}
		select {
		case <-wake:
			more = true
		case <-retry:
			retry, more = nil, true
		case fr := <-c.out:
			if w.Message(fr.typ, fr.data) != nil {
				return
			}
		case <-ticker.C:
			if w.Ping() != nil {
				return
			}
		case <-c.stop:
			for i := 0; c.drain && i < drainBatches; i++ {
				if n, readErr, err := c.writeEvents(w, &cursor); n == 0 || readErr != nil || err != nil {
					break
				}
			}
			_ = w.Close(c.closeCode, c.closeText)
			return
		}
	}
}

// writeEvents writes the next batch of stored events after cursor; n is
// how many it read, readErr the store's failure, err the connection's.
func (c *Client) writeEvents(w wire.Writer, cursor *uint64) (n int, readErr, err error) {
	evs, readErr := c.h.cfg.Store.Events(c.thread, *cursor, c.lim.Batch)
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
func (c *Client) readPump() {
	_ = c.conn.SetReadDeadline(time.Now().Add(c.lim.PongWait))
	c.conn.SetPongHandler(func(string) error { return c.conn.SetReadDeadline(time.Now().Add(c.lim.PongWait)) })
	c.conn.SetReadLimit(c.lim.ReadLimit) // above it: close 1009, as for attached clients
	for {
		typ, data, err := c.conn.ReadMessage()
		if err != nil {
			c.log.Debug("forwarded client's connection ended", "err", err)
			return
		}
		c.toRelay(typ, data)
	}
}

// toRelay writes one frame of the client to the upstream, waiting for
// one (at most upstreamWait) while there is none; a request that cannot
// be sent is answered sandbox_unavailable.
func (c *Client) toRelay(typ int, data []byte) {
	if up := c.awaitUpstream(); up != nil {
		_ = up.SetWriteDeadline(time.Now().Add(c.lim.WriteWait))
		if up.WriteMessage(typ, data) == nil {
			return
		}
	}
	if typ != websocket.TextMessage { // input of a terminal that ended with its relay
		return
	}
	var env wire.Envelope
	_ = json.Unmarshal(data, &env)
	c.answer(wire.ErrorEnvelope(c.thread, env.ID, wire.CodeSandboxUnavailable,
		"no bridge relays thread %s right now (it is moving to another bridge): send the request again", c.thread))
}
