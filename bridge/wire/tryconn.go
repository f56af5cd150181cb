package wire

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TryConn is a connection a writer can write to without ever waiting:
// during a try (Try), a write the socket cannot take whole at once is
// kept in memory, and the next write outside a try, or Flush, writes it
// first. A producer can then write a small message on its own goroutine
// when the connection's writer is idle (Pump.TryKick), where handing the
// message to a writer goroutine costs a wake-up of another goroutine,
// often of another CPU: a reader that answers a peer never blocks on a
// slow peer's socket, because its try takes only what the socket's
// buffer has room for.
//
// Outside a try it is the connection it wraps. Writes must not overlap
// (gorilla/websocket's Conn orders its own); Try and Blocked belong to the
// connection's one writer.
type TryConn struct {
	net.Conn
	raw    syscall.RawConn
	trying atomic.Bool

	mu      sync.Mutex // orders Write and Flush
	pending []byte     // written in a try, not yet taken by the socket
	err     error      // a try's failed write: every later write fails with it
}

// NewTryConn wraps c in a TryConn, or returns c as it is when it has no
// file descriptor to write to without waiting (a TLS connection, a pipe):
// its writer then always runs on a goroutine of its own.
func NewTryConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &TryConn{Conn: c, raw: raw}
}

// TryHijacker hands a WebSocket upgrader (gorilla/websocket's) the
// connection it takes over as a TryConn, when it can be one.
type TryHijacker struct{ http.ResponseWriter }

// Hijack takes over the connection (http.Hijacker).
func (h TryHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nc, brw, err
	}
	return NewTryConn(nc), brw, nil
}

// TryConnOf is the TryConn c was made on, or nil.
func TryConnOf(c net.Conn) *TryConn {
	tc, _ := c.(*TryConn)
	return tc
}

// SyscallConn is the wrapped connection's (syscall.Conn), so that what
// watches the socket itself (a hang-up) still can.
func (c *TryConn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

// Try starts (on) or ends a try: while it lasts, writes never wait.
func (c *TryConn) Try(on bool) { c.trying.Store(on) }

// Blocked reports whether bytes written in a try wait for the socket (or
// a try's write failed): the try should stop, and leave the rest to a
// writer that may wait.
func (c *TryConn) Blocked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0 || c.err != nil
}

// Write writes b. In a try it writes what the socket takes at once and
// keeps the rest (and everything after it, until a Flush) for later; it
// then reports all of b written. Outside a try it first writes what a try
// kept, then b, waiting as the wrapped connection does.
func (c *TryConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.trying.Load() {
		rest := b
		if len(c.pending) == 0 {
			n, err := c.writeNow(b)
			if err != nil {
				c.err = err
				return n, err
			}
			rest = b[n:]
		}
		c.pending = append(c.pending, rest...)
		return len(b), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Flush writes what a try kept, within wait; it fails with the error a
// try's write met, if one did.
func (c *TryConn) Flush(wait time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if len(c.pending) == 0 {
		return nil
	}
	if err := c.Conn.SetWriteDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	return c.flushLocked()
}

// flushLocked writes the kept bytes, waiting for the socket; c.mu is held.
// The buffer goes once written: an idle connection keeps none.
func (c *TryConn) flushLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.pending)
	c.pending = nil
	if err != nil {
		c.err = err
	}
	return err
}

// writeNow writes what of b the socket takes without waiting: n < len(b)
// when its buffer is full.
func (c *TryConn) writeNow(b []byte) (n int, err error) {
	for n < len(b) {
		var k int
		var werr error
		if err := c.raw.Write(func(fd uintptr) bool {
			k, werr = syscall.Write(int(fd), b[n:])
			return true // never wait for the socket
		}); err != nil {
			return n, err // closed, or a deadline passed
		}
		switch {
		case errors.Is(werr, syscall.EINTR):
			continue
		case errors.Is(werr, syscall.EAGAIN):
			return n, nil
		case werr != nil:
			return n, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: werr}
		case k <= 0:
			return n, nil
		}
		n += k
	}
	return n, nil
}
