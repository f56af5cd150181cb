package wire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// A stream's flow control, the same on both sides of it: the receiving
// side holds at most its window of bytes it has not read (Inbox; the
// window and the largest data frame are its StreamLimits) and gives
// credit back as it reads; the sending side sends only what it has credit
// for (Credit). The connection's reader only ever appends to an Inbox, so
// it never waits for a slow stream, and one stream's reader that stops
// reading stalls that stream alone.

// ErrStreamWindow is returned by Inbox.Push when the peer sent more than
// the credit it had.
var ErrStreamWindow = errors.New("stream data beyond the window")

// Inbox holds the bytes a stream received and its reader has not taken
// yet. Push is for the connection's reader and never blocks; Read is for
// the stream's one reader. It is safe for concurrent use.
type Inbox struct {
	mu      sync.Mutex
	limits  StreamLimits
	buf     []byte
	eof     bool  // the peer ended its direction
	err     error // the stream was aborted
	unacked int   // bytes read since the last credit returned
	wake    *Waker
}

// NewInbox returns an empty Inbox that accepts what limits say.
func NewInbox(limits StreamLimits) *Inbox { return &Inbox{limits: limits, wake: NewWaker()} }

// SetLimits replaces the limits of an Inbox that got no data yet (the
// opener's, once the answer to its port_open says what was agreed).
func (b *Inbox) SetLimits(limits StreamLimits) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limits = limits
}

// Push appends data the peer sent; an empty data ends the peer's
// direction (EOF). It fails with ErrStreamWindow when the buffer would
// pass the window (the peer ignored its credit), and after an EOF or a
// frame over the limits' Data.
func (b *Inbox) Push(data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.err != nil:
		return nil // aborted: the data is dropped
	case b.eof:
		return fmt.Errorf("%w: data after the end of the stream", ErrBadFrame)
	case len(data) == 0:
		b.eof = true
	case len(data) > b.limits.Data:
		return fmt.Errorf("%w: %d bytes of stream data in a frame, more than %d", ErrBadFrame, len(data), b.limits.Data)
	case len(b.buf)+len(data) > b.limits.Window:
		return fmt.Errorf("%w: %d bytes held and %d more", ErrStreamWindow, len(b.buf), len(data))
	default:
		b.buf = append(b.buf, data...)
	}
	b.wake.Wake()
	return nil
}

// Abort ends the inbox with err: Read returns err (after nothing else).
func (b *Inbox) Abort(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
		b.buf = nil
	}
	b.wake.Wake()
}

// Read copies held bytes into p, waiting while there are none until data
// or the end arrives, the inbox is aborted, or deadline (a channel that
// closes when the read deadline passes; nil for none) closes — then it
// returns os.ErrDeadlineExceeded. credit is the number of bytes to give
// back to the peer now in a window frame (0: not yet; credit is returned
// in batches of a quarter window, or when the buffer runs empty).
func (b *Inbox) Read(p []byte, deadline <-chan struct{}) (n int, credit uint32, err error) {
	for {
		b.mu.Lock()
		switch {
		case b.err != nil:
			b.mu.Unlock()
			return 0, 0, b.err
		case len(b.buf) > 0:
			n = copy(p, b.buf)
			b.buf = b.buf[n:]
			if len(b.buf) == 0 {
				b.buf = nil // give a drained buffer back
			}
			b.unacked += n
			if b.unacked >= b.limits.Window/4 || len(b.buf) == 0 {
				credit, b.unacked = uint32(b.unacked), 0
			}
			b.mu.Unlock()
			return n, credit, nil
		case b.eof:
			b.mu.Unlock()
			return 0, 0, io.EOF
		}
		b.mu.Unlock()
		select {
		case <-b.wake.C():
		case <-deadline:
			return 0, 0, os.ErrDeadlineExceeded
		}
	}
}

// Buffered reports how many bytes wait to be read.
func (b *Inbox) Buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

// Credit is a stream's sending side: how many bytes it may still send.
// Add is for the connection's reader (window frames) and never blocks;
// Take is for the stream's one writer. It is safe for concurrent use.
type Credit struct {
	mu     sync.Mutex
	n      int64
	window int64
	err    error
	wake   *Waker
}

// NewCredit returns a Credit holding the initial window, the peer's.
func NewCredit(window int) *Credit {
	return &Credit{n: int64(window), window: int64(window), wake: NewWaker()}
}

// SetWindow replaces the window of a Credit none of which was taken yet
// (the opener's, once the answer to its port_open says what was agreed).
func (c *Credit) SetWindow(window int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(window) - c.window
	c.window = int64(window)
}

// Add returns n bytes of credit; it fails when that would hold more than
// the window (the peer returned credit it never had).
func (c *Credit) Add(n uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n+int64(n) > c.window {
		return fmt.Errorf("%w: credit of %d bytes on top of %d", ErrStreamWindow, n, c.n)
	}
	c.n += int64(n)
	c.wake.Wake()
	return nil
}

// Abort ends the credit with err: Take returns it.
func (c *Credit) Abort(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	c.wake.Wake()
}

// Take takes up to max bytes of credit, waiting while there is none until
// some comes back, the credit is aborted (its error) or deadline closes
// (os.ErrDeadlineExceeded).
func (c *Credit) Take(max int, deadline <-chan struct{}) (int, error) {
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return 0, c.err
		}
		if c.n > 0 {
			n := min(int64(max), c.n)
			c.n -= n
			c.mu.Unlock()
			return int(n), nil
		}
		c.mu.Unlock()
		select {
		case <-c.wake.C():
		case <-deadline:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// Take hands a stream frame from the peer to its stream's Inbox (data)
// or Credit (window). The error means the frame broke the window: the
// stream must be closed with CodeBadMessage.
func (f Frame) Take(in *Inbox, c *Credit) error {
	switch f.Kind {
	case FrameStreamData:
		return in.Push(f.Data)
	case FrameStreamWindow:
		return c.Add(f.WindowOf())
	}
	return fmt.Errorf("%w: kind %d is not a stream frame", ErrBadFrame, f.Kind)
}

// Deadline is a settable deadline as a channel that closes when it
// passes, for a net.Conn's SetReadDeadline and SetWriteDeadline. The zero
// value has none; it is safe for concurrent use.
type Deadline struct {
	mu    sync.Mutex
	gen   uint64 // counts Set calls: a timer of an older one does nothing
	timer *time.Timer
	c     chan struct{} // closed when the deadline passed; nil: not made yet
	fired bool          // c is closed
}

// Set sets the deadline; the zero time means none. A time in the past
// closes the channel at once.
func (d *Deadline) Set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.c == nil || d.fired {
		d.c, d.fired = make(chan struct{}), false
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		close(d.c)
		d.fired = true
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen && !d.fired {
			close(d.c)
			d.fired = true
		}
	})
}

// Done returns the channel that closes when the deadline passes.
func (d *Deadline) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		d.c = make(chan struct{})
	}
	return d.c
}
