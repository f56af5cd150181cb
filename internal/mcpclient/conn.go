package mcpclient

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Timing of the MCP traffic.
const (
	// ConnectWait bounds starting or reaching a server with its
	// initialization handshake, and listing its tools.
	ConnectWait = 30 * time.Second
	// ListFresh is how long a server's tool list is used before it is
	// asked again (a tools/list_changed notification drops it at once).
	ListFresh = time.Minute
	// TerminateWait is how long a stdio server has to exit after its
	// stdin closes before it is signalled, and again before it is killed.
	TerminateWait = 2 * time.Second
)

// Dial starts or reaches a server and initializes a session within ctx.
// The session must call listChanged on a tools/list_changed notification
// (CommandConfig.ListChanged).
type Dial func(ctx context.Context, listChanged func()) (Session, error)

// Group owns the session watchers of the Conns it made: Close ends every
// session and waits for them. It is safe for concurrent use.
type Group struct {
	closedErr error

	mu     sync.Mutex
	closed bool
	conns  []*Conn
	wg     sync.WaitGroup // session watchers (Conn.watch)
}

// NewGroup returns a group whose Conns answer closedErr once it is
// closed.
func NewGroup(closedErr error) *Group { return &Group{closedErr: closedErr} }

// ConnConfig configures a Conn.
type ConnConfig struct {
	// Dial connects to the server; required.
	Dial Dial
	// RetryWait is how long a failed connect is answered with its error
	// without trying again, so that a dead server does not hold up every
	// caller by ConnectWait; zero tries every time.
	RetryWait time.Duration
	// Logger receives the session's start and end; nil discards them.
	Logger *slog.Logger
}

// Conn is one MCP server and its live session, if any. It is safe for
// concurrent use.
type Conn struct {
	g   *Group
	cfg ConnConfig
	log *slog.Logger

	mu     sync.Mutex
	sess   Session
	ended  chan struct{} // closed when sess has ended (watch)
	tools  []Tool
	listed time.Time
	stale  atomic.Bool // tools/list_changed came: list again
	failed time.Time   // when the last connect failed
	err    error       // and why
}

// Conn returns a Conn for cfg in g. It connects nothing until asked.
func (g *Group) Conn(cfg ConnConfig) *Conn {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{g: g, cfg: cfg, log: cfg.Logger}
	g.mu.Lock()
	g.conns = append(g.conns, c)
	g.mu.Unlock()
	return c
}

// Close ends every session of the group's Conns (a stdio server's stdin
// is closed, then it is signalled) and waits for their watchers. Later
// uses fail with the group's error. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	conns := g.conns
	g.mu.Unlock()
	for _, c := range conns {
		c.Drop(nil)
	}
	g.wg.Wait()
}

// track counts one more watcher, unless the group is closed.
func (g *Group) track() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.wg.Add(1)
	}
	return !g.closed
}

// Session returns the live session and a channel closed once it has
// ended, connecting first (within ConnectWait) when there is none. It
// blocks while it connects, or until ctx ends.
func (c *Conn) Session(ctx context.Context) (Session, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		return c.sess, c.ended, nil
	}
	if !c.g.track() { // for watch
		return nil, nil, c.g.closedErr
	}
	if since := time.Since(c.failed); c.err != nil && since < c.cfg.RetryWait {
		c.g.wg.Done()
		return nil, nil, fmt.Errorf("%w (tried %s ago; again after %s)", c.err, since.Round(time.Second), c.cfg.RetryWait)
	}
	cctx, cancel := context.WithTimeout(ctx, ConnectWait)
	defer cancel()
	sess, err := c.cfg.Dial(cctx, c.forgetList)
	if err != nil {
		c.g.wg.Done()
		if ctx.Err() == nil { // not the caller giving up
			c.failed, c.err = time.Now(), err
		}
		return nil, nil, err
	}
	c.err = nil
	c.sess, c.tools, c.ended = sess, nil, make(chan struct{})
	go c.watch(sess, c.ended)
	c.log.Info("MCP server connected")
	return sess, c.ended, nil
}

// watch waits for sess to end (the process exited, the server hung up)
// and forgets it, so that the next use connects again.
func (c *Conn) watch(sess Session, ended chan struct{}) {
	defer c.g.wg.Done()
	err := sess.Wait()
	_ = sess.Close() // releases what the session still holds
	close(ended)
	c.mu.Lock()
	if c.sess == sess {
		c.sess, c.tools = nil, nil
	}
	c.mu.Unlock()
	c.log.Info("MCP server session ended", "err", err)
}

// Drop closes the live session if it is sess (whichever it is when sess
// is nil); the next use connects again.
func (c *Conn) Drop(sess Session) {
	c.mu.Lock()
	cur := c.sess
	if cur == nil || (sess != nil && cur != sess) {
		c.mu.Unlock()
		return
	}
	c.sess, c.tools = nil, nil
	c.mu.Unlock()
	_ = cur.Close()
}

// Live reports whether sess is still the live session.
func (c *Conn) Live(sess Session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess == sess
}

// Tools returns the server's tools, connecting first when needed, and
// asking the server when the cached list is older than ListFresh or the
// server said it changed. It blocks at most ConnectWait for each, or
// until ctx ends.
func (c *Conn) Tools(ctx context.Context) ([]Tool, error) {
	sess, _, err := c.Session(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.sess == sess && c.tools != nil && time.Since(c.listed) < ListFresh && !c.stale.Swap(false) {
		tools := c.tools
		c.mu.Unlock()
		return tools, nil
	}
	c.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, ConnectWait)
	defer cancel()
	tools, err := sess.ListTools(lctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	if tools == nil {
		tools = []Tool{} // listed: cached even when there are none
	}
	c.mu.Lock()
	if c.sess == sess {
		c.tools, c.listed = tools, time.Now()
	}
	c.mu.Unlock()
	return tools, nil
}

// forgetList marks the cached tool list stale (tools/list_changed).
func (c *Conn) forgetList() { c.stale.Store(true) }
