package agentlink

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Deadlines and sizes of the agent connection.
const (
	// writeWait bounds writing one frame.
	writeWait = 10 * time.Second
	// pongWait is how long the agent may stay silent; pings keep it talking.
	pongWait = 60 * time.Second
	// pingPeriod is how often the writer pings; shorter than pongWait.
	pingPeriod = pongWait * 9 / 10
	// maxFrame bounds a binary frame from the agent: terminal output, or
	// a stream's data (the larger).
	maxFrame = wire.MaxBinaryFrame
	// inspectWait bounds asking the engine why an agent went away; the
	// engine may report the exit a moment after the socket closes.
	inspectWait = 3 * time.Second
)

// Thread is what a link needs of its thread (the server's thread).
type Thread interface {
	// Publish runs env through the thread's event path from redaction on:
	// it is numbered, stored and fanned out. It must not block on clients.
	Publish(env wire.Envelope)
	// PublishCovered is Publish of an agent's event with the thread's agent
	// cursor after it (c, its Held filled in by the thread): the store
	// commits the cursor in the same transaction as the last event env
	// logs, so a bridge killed at any point restarts with a cursor that
	// matches its log.
	PublishCovered(env wire.Envelope, c store.Cursor)
	// Deliver takes an agent message that is not an event: a reply (for
	// the client connID names when routed), a terminal message or a
	// tool_check. env.ID is the client's own id again.
	Deliver(env wire.Envelope, connID string, routed bool)
	// TerminalOutput fans a terminal output frame out to its watchers; it
	// may wait for them (it holds the reader).
	TerminalOutput(frame []byte)
	// AgentResumed gives the thread the agent's account of its work from
	// its resumed answer.
	AgentResumed(r wire.Resumed)
	// SandboxExited publishes that sb stopped and returns the event.
	SandboxExited(sb sandbox.Sandbox) wire.SandboxExited
	// HeldSnapshot encodes the output kept back by redaction, stored with
	// the cursor; RestoreHeld takes back a stored one.
	HeldSnapshot() json.RawMessage
	RestoreHeld(json.RawMessage)
}

// Fleet is what a link asks of the thread's fleet (*fleet.Fleet).
type Fleet interface {
	LossCause(ctx context.Context, b *fleet.Box, id string) (wire.SandboxExited, bool)
	Replace(ctx context.Context, b *fleet.Box, id string, why wire.SandboxExited) (string, *websocket.Conn, error)
	Greet(ctx context.Context, b *fleet.Box, id string) (*websocket.Conn, error)
	Linked(b *fleet.Box, id, sandboxID string)
}

// Store keeps the thread's events, agent cursor and requests in flight
// (bridge/store.Store implements it).
type Store interface {
	// Events returns up to limit stored events with seq > after; Flush
	// waits until every queued append is committed.
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
	Flush()
	// SaveCursor and SaveInflight queue behind the events queued before;
	// Cursor and Inflight read the stored ones.
	SaveCursor(thread string, c store.Cursor)
	Cursor(thread string) (c store.Cursor, ok bool, err error)
	SaveInflight(thread string, reqs []wire.Envelope)
	Inflight(thread string) ([]wire.Envelope, error)
}

// Config configures a Link. Every field is required but Log.
type Config struct {
	ID      string // the thread's id
	Log     *slog.Logger
	Thread  Thread
	Fleet   Fleet
	Box     *fleet.Box // the thread's box
	Manager sandbox.Manager
	Store   Store
	// Server ends when the server closes: it ends work on a next
	// connection (replace, reconnect) too.
	Server context.Context
	// Group counts the link's goroutines; the thread waits for it.
	Group *sync.WaitGroup
	// LogEmpty says the thread's log is new: nothing in it runs.
	LogEmpty bool
	// MaxStreams bounds the thread's open port streams (streams.go);
	// default DefaultMaxStreams.
	MaxStreams int
}

// Link is a thread's link to its agent. It is safe for concurrent use.
type Link struct {
	cfg     Config
	id      string
	log     *slog.Logger
	ctx     context.Context // the thread's: ends when the thread ends
	sent    inflight        // requests the agent has not answered (inflight.go)
	streams *Streams        // port streams (streams.go)
	// requests and input wait for the current connection's writer
	// (write.go): Send, SendInput. They outlive a connection.
	requests, input *wire.Queue[wire.Envelope]
	// live is cur, for the queues' kicks (never waits for mu).
	live atomic.Pointer[connection]

	mu      sync.Mutex
	closing bool
	cur     *connection // the current agent connection
	// replacing is open while the fleet's planned replacement of the
	// sandbox (replacedLoss) runs: a request that finds the connection
	// ended waits for the next one (write.go).
	replacing chan struct{}
	cursor    agentCursor // where the log is in the agent's numbering (resume.go)
	open      openWork    // the turn and calls the log shows running (turnend.go)
}

// connection is one agent connection's lifetime: dead is closed by its
// reader when it ends; pump runs its writer (write.go) while it has work,
// and pump.Done() is closed when the writer finished.
type connection struct {
	n        uint64 // numbers the connection (inflight.go)
	ws       *websocket.Conn
	dead     chan struct{}
	deadOnce sync.Once
	pump     *wire.Pump
	// The writer's own: set by start before the pump's first run.
	greeted bool
	stopCtx func() bool // ends the kick on the thread's end
	// tc is ws's socket when a request can be written on the sender's
	// goroutine (Send, tryWrite); nil when it cannot. try is tryWrite
	// on c, made once.
	tc  *wire.TryConn
	try func() bool
}

// connSeq numbers agent connections.
var connSeq atomic.Uint64

func (l *Link) newConnection(ws *websocket.Conn) *connection {
	c := &connection{n: connSeq.Add(1), ws: ws, dead: make(chan struct{}), tc: wire.TryConnOf(ws.NetConn())}
	c.pump = wire.NewPump(func() bool { return l.write(c) }, pingPeriod)
	c.try = func() bool { return l.tryWrite(c) }
	return c
}

// markDead closes c.dead once, and has the writer see it.
func (c *connection) markDead() {
	c.deadOnce.Do(func() {
		close(c.dead)
		c.pump.Kick()
	})
}

// New returns the link of a thread whose agent was greeted on ws; ctx
// ends when the thread ends. It reads the stored cursor and requests in
// flight; [Link.Start] starts it.
func New(ctx context.Context, ws *websocket.Conn, cfg Config) *Link {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	l := &Link{cfg: cfg, id: cfg.ID, log: cfg.Log, ctx: ctx}
	l.cur = l.newConnection(ws)
	l.live.Store(l.cur)
	l.streams = newStreams(l, cfg.MaxStreams)
	l.requests, l.input = newRequests(l.kick), newInput(l.kick) // write.go
	l.open.loaded = cfg.LogEmpty                                // turnend.go: a stored log is read when needed
	l.loadCursor()                                              // resume.go
	l.loadInflight()                                            // inflight.go
	return l
}

// Start starts the first connection's reader and writer.
func (l *Link) Start() {
	l.mu.Lock()
	c := l.cur
	l.mu.Unlock()
	l.start(c)
}

// Stop marks the thread as ending: a connection lost from now on is
// neither reported nor replaced. The thread then cancels the context and
// waits for Config.Group.
func (l *Link) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
}

// Dead is closed when the current agent connection has ended.
func (l *Link) Dead() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.dead
}

// start starts c's reader, and its writer's pump (write.go). The writer
// counts in Config.Group until it finished, though it has a goroutine
// only while it writes.
func (l *Link) start(c *connection) {
	l.cfg.Group.Add(2)
	c.stopCtx = context.AfterFunc(l.ctx, c.pump.Kick) // the writer says goodbye
	go l.read(c)
	c.pump.Start()
}

// read reads c's messages until the connection ends, then handles the
// loss (lost.go) unless the thread is ending.
func (l *Link) read(c *connection) {
	defer l.cfg.Group.Done()
	ws := c.ws
	defer ws.Close()
	l.started() // resume.go: agent events wait for resumed
	_ = ws.SetReadDeadline(time.Now().Add(pongWait))
	ws.SetPongHandler(func(string) error {
		return ws.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		mt, r, err := ws.NextReader()
		if err != nil {
			c.markDead() // before telling clients, so their next request fails fast
			l.streams.lost()
			l.lost(c, err)
			return
		}
		if mt == websocket.BinaryMessage { // terminal output, stream traffic
			l.binaryFrame(r)
			continue
		}
		env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
		if err != nil {
			l.log.Warn("bad frame from agent", "err", err)
			continue
		}
		l.fromAgent(env)
	}
}

// fromAgent routes one agent message: events go down the event path;
// replies go to the thread with the client their id names.
func (l *Link) fromAgent(env wire.Envelope) {
	env.Thread = l.id
	if isStreamMessage(env) { // streams.go
		l.streams.message(env)
		return
	}
	if answersRequest(env) && l.sent.forget(env.ID) { // the agent has it (inflight.go)
		defer l.sent.persist() // stored behind the answer's event
	}
	connID, id, routed := strings.Cut(env.ID, "/")
	if routed {
		env.ID, connID = id, connOf(connID)
	}
	if env.Seq > 0 {
		l.agentEvent(env)          // resume.go: duplicates dropped, gaps reported
		l.replayPublished(env.Seq) // turnend.go
		return
	}
	if env.Type == wire.TypeAccepted { // a request sent again that the agent ran already
		l.log.Info("agent had accepted the request sent again", "id", env.ID)
		return
	}
	if l.resumeAnswer(env) { // resume.go
		l.noteResumed(env) // turnend.go
		return
	}
	l.cfg.Thread.Deliver(env, connID, routed)
}

// writeEnvelope writes one frame with the write deadline.
func writeEnvelope(ws *websocket.Conn, env wire.Envelope) error {
	return wire.Writer{Conn: ws, Wait: writeWait}.JSON(env)
}

// frameScratch holds the buffers binary frames are read through: one
// taken for each frame, given back once the frame is handled, so an idle
// link that once carried a terminal or a stream holds none (a buffer is
// maxFrame+1 bytes, about 128 KiB).
var frameScratch = sync.Pool{New: func() any {
	b := make([]byte, maxFrame+1)
	return &b
}}

// binaryFrame reads a binary frame from the agent through a scratch
// buffer from frameScratch. A stream frame is handled straight from it
// (the stream's inbox copies the data it keeps): no allocation, and one
// copy less, for each frame of a download. A terminal frame is copied
// into a buffer of its own size, which its watchers keep. A frame over
// maxFrame is cut there (wire.ParseFrame then refuses it).
func (l *Link) binaryFrame(r io.Reader) {
	scratch := frameScratch.Get().(*[]byte)
	defer frameScratch.Put(scratch)
	data, err := readFull(r, *scratch)
	switch {
	case err != nil:
	case len(data) > 0 && wire.IsStreamFrame(wire.FrameKind(data[0]&0x0f)):
		l.streams.parseFrame(data) // streams.go: never waits, keeps nothing of data
	default:
		l.cfg.Thread.TerminalOutput(append([]byte(nil), data...))
	}
}

// readFull reads r into buf until r ends or buf is full, and returns
// what it read.
func readFull(r io.Reader, buf []byte) ([]byte, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}
