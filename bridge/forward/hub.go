// Package forward serves, on a bridge that shares its store with other
// bridges (docs/store.md, "Forwarding"), the clients whose thread another
// bridge relays. Such a client stays connected to the bridge it reached:
// the thread's events come from the store, read after the client's cursor
// and woken by the store's notices (store.Listener: PostgreSQL's
// LISTEN/NOTIFY); its requests go to the relay over a connection this
// bridge dials with the client's credential (the upstream), dialled
// again, to whichever bridge relays the thread then, when the relay goes
// away. So a load balancer in front of several bridges needs no
// stickiness, and a relay that dies does not end its forwarded clients'
// connections. The relay authenticates and authorizes the client again.
//
// The package knows nothing of the bridge's threads: where a thread is
// relayed comes from the bridge (Relays), its events from the store
// (Store). One Hub per bridge:
//
//	c := hub.NewClient(conn, hello, helloID, r.Header, log)
//	up, err := c.Dial(ctx, relayAddr) // the first upstream; on error refuse the client
//	stop := users.Watch(ctx, c.Revoke)
//	hub.Serve(c, up)                  // until the client or the bridge ends
//	stop()
package forward

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Store is the part of the event store a forwarded client reads.
type Store interface {
	// Events returns up to limit events of thread after seq after.
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
	// LastSeq is the seq of thread's last stored event.
	LastSeq(thread string) (uint64, error)
}

// Relays tells where a thread is relayed; the bridge implements it.
type Relays interface {
	// Address is where a forwarded client of thread sends its requests
	// now: the announced address of the bridge that relays it (this
	// one's own when it does), "" when none can be had yet (ask again
	// later), ErrNoAddress or ErrThreadGone. One answer says it all: a
	// second question (is it relayed here?) could find a takeover by this
	// bridge finished in between and read "not yet" as "no address".
	Address(ctx context.Context, thread string) (string, error)
}

// ErrThreadGone is Relays.Address's answer for a thread the store no
// longer has: its forwarded clients are told not_found and closed.
var ErrThreadGone = errors.New("the thread no longer exists")

// ErrNoAddress is Relays.Address's answer for a thread this bridge relays
// while it announced no address to dial: its forwarded clients are closed
// as moved (they reconnect, and are then attached here).
var ErrNoAddress = errors.New("the thread is relayed here, and this bridge announced no address")

// Limits are a forwarded connection's deadlines and sizes; the bridge
// gives those of its attached clients, so both kinds behave alike.
type Limits struct {
	WriteWait    time.Duration // bounds writing one frame, and a full queue
	PongWait     time.Duration // how long a peer may stay silent
	PingPeriod   time.Duration // how often the writer pings (< PongWait)
	HelloTimeout time.Duration // bounds waiting for the relay's hello
	ReadLimit    int64         // the largest client frame (above: close 1009)
	SendBuffer   int           // frames waiting for a slow client before it is dropped
	Batch        int           // events read from the store at a time
}

// Config is what a Hub is made of. Every field but Log is required.
type Config struct {
	Store    Store
	Listener store.Listener // wakes the writers on commits
	Relays   Relays
	Software string // the bridge's, in the hello a client gets
	Limits   Limits
	// Enter counts a goroutine of the Hub in the bridge's connections
	// (false: the bridge is closing, start none); Done ends the count.
	Enter func() bool
	Done  func()
	Log   *slog.Logger // nil: discard
}

// Hub serves one bridge's forwarded clients. Its one listening goroutine
// starts with the first client and ends with the Hub's context (the
// bridge's). Safe for concurrent use.
type Hub struct {
	ctx context.Context
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	listening bool
	subs      map[string]map[*Client]struct{} // by thread
}

// NewHub returns the Hub of a bridge whose life is ctx.
func NewHub(ctx context.Context, cfg Config) *Hub {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Hub{ctx: ctx, cfg: cfg, log: cfg.Log, subs: map[string]map[*Client]struct{}{}}
}

// Serve runs the client c, with up as its first upstream (Client.Dial),
// until it ends, its writer woken by the notices of its thread; it
// returns once c's goroutines have.
func (h *Hub) Serve(c *Client, up *websocket.Conn) {
	h.add(c)
	defer h.remove(c)
	c.run(up)
}

func (h *Hub) add(c *Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[c.thread] == nil {
		h.subs[c.thread] = map[*Client]struct{}{}
	}
	h.subs[c.thread][c] = struct{}{}
	if h.listening || !h.cfg.Enter() { // a closing bridge: c is kicked with it
		return
	}
	h.listening = true
	go func() {
		defer h.cfg.Done()
		_ = h.cfg.Listener.Listen(h.ctx, h.notice) // ends with the bridge (its error is ctx's)
	}()
}

func (h *Hub) remove(c *Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[c.thread], c)
	if len(h.subs[c.thread]) == 0 {
		delete(h.subs, c.thread)
	}
}

// notice wakes the clients of the notice's thread, or every one on a
// Resync (notices may have been missed).
func (h *Hub) notice(no store.Notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if no.Resync {
		for _, cs := range h.subs {
			for c := range cs {
				c.wakeUp()
			}
		}
		return
	}
	for c := range h.subs[no.Thread] {
		c.wakeUp()
	}
}
