package session

import (
	"errors"
	"io"
	"sync"

	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Terminal traffic of a connection (docs/terminal.md) has a queue of its
// own beside the events: output frames and terminal control messages, in
// order, bounded in bytes.
const (
	// termBudget is how many bytes of output frames may wait for the writer
	// before the connection counts as full (terminal.Sink.Offer refuses).
	termBudget = wire.TerminalBudget
	// termQueueLen bounds the number of queued terminal items.
	termQueueLen = 4096
	// coalesceItems bounds how many queued items one write gathers, so the
	// writer still gets round to pings under a steady stream.
	coalesceItems = 64
)

// termQueue is a connection's terminal queue (wire.Queue) and the
// writer's state for it.
type termQueue struct {
	term *wire.Queue[wire.Envelope]
	// merged is the writer's buffer for coalesced frames, kept between
	// writes (a WebSocket write is done with its buffer when it returns):
	// a stream costs no allocation per write.
	merged []byte
}

// termItem is one queued terminal item: a control message or an output frame.
type termItem = wire.Item[wire.Envelope]

func newTermQueue() termQueue {
	return termQueue{term: wire.NewQueue[wire.Envelope](termQueueLen, termBudget)}
}

// terminalRegistry holds the server's terminal sessions, created on first
// use; closeTerminals closes it for good.
type terminalRegistry struct {
	mu     sync.Mutex
	reg    *terminal.Registry
	closed bool
}

func (t *terminalRegistry) get() *terminal.Registry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reg
}

// terminals returns the server's registry, creating it on first use. After
// closeTerminals it returns a closed registry, whose Open fails.
func (s *Server) terminals() *terminal.Registry {
	s.terms.mu.Lock()
	defer s.terms.mu.Unlock()
	if s.terms.reg == nil {
		cfg := s.cfg.Terminal
		if cfg.Dir == "" {
			cfg.Dir = s.cfg.Loop.Workspace
		}
		if cfg.Logger == nil {
			cfg.Logger = s.log.With("component", "terminal")
		}
		s.terms.reg = terminal.New(cfg)
		if s.terms.closed {
			s.terms.reg.Close()
		}
	}
	return s.terms.reg
}

// closeTerminals ends every terminal session (the sandbox is ending) and
// waits for their goroutines.
func (s *Server) closeTerminals() {
	s.terms.mu.Lock()
	s.terms.closed = true
	reg := s.terms.reg
	s.terms.mu.Unlock()
	if reg != nil {
		reg.Close()
	}
}

// Send implements terminal.Sink: it queues a control message after the
// frames queued before it. A connection whose terminal queue is full is
// dropped.
func (c *conn) Send(env wire.Envelope) {
	if c.thread != nil {
		env.Thread = c.thread.name
	}
	select {
	case <-c.done:
		return
	default:
	}
	if !c.term.Send(env) {
		c.log.Warn("terminal queue full; dropping connection")
		c.drop()
	}
}

// Offer implements terminal.Sink: it queues an output frame unless
// termBudget bytes already wait.
func (c *conn) Offer(frame []byte) bool {
	select {
	case <-c.done:
		return true // gone: nothing to wait for
	default:
	}
	return c.term.Offer(frame)
}

// Watch implements terminal.Sink: w is woken when the writer takes an item
// or the connection stops.
func (c *conn) Watch(w *wire.Waker) { c.term.Watch(w) }

// Unwatch implements terminal.Sink.
func (c *conn) Unwatch(w *wire.Waker) { c.term.Unwatch(w) }

// writeTerm writes out and whatever else is queued (up to coalesceItems),
// merging consecutive output frames of one session into frames of up to
// wire.MaxFrameData bytes. A frame with nothing to merge goes out as it is.
func (c *conn) writeTerm(out termItem) error {
	var first []byte // the frame being built, not yet copied into merged
	var merged []byte
	var session string
	flush := func() error {
		var err error
		switch {
		case merged != nil:
			err = c.writeBinary(merged)
			c.merged = merged[:0]
		case first != nil:
			err = c.writeBinary(first)
		}
		first, merged = nil, nil
		return err
	}
	for i := 0; ; i++ {
		c.term.Release(out)
		if out.Msg != nil {
			if err := flush(); err != nil {
				return err
			}
			if err := c.write(*out.Msg); err != nil {
				return err
			}
		} else if err := c.mergeFrame(out.Frame, &first, &merged, &session, flush); err != nil {
			return err
		}
		if i >= coalesceItems {
			return flush()
		}
		var ok bool
		if out, ok = c.term.TryNext(); !ok {
			return flush()
		}
	}
}

// mergeFrame adds frame to the frame being built (first, then merged once
// a second one joins it), flushing first when it is of another session or
// would grow past wire.MaxFrameData.
func (c *conn) mergeFrame(frame []byte, first, merged *[]byte, session *string, flush func() error) error {
	f, err := wire.ParseFrame(frame)
	if err != nil {
		return err
	}
	size := len(*first) + len(*merged)
	if size > 0 && (f.Session != *session || size+len(f.Data) > wire.FrameHeaderLen(*session)+wire.MaxFrameData) {
		if err := flush(); err != nil {
			return err
		}
		size = 0
	}
	switch {
	case size == 0:
		*session, *first = f.Session, frame
	case *merged == nil:
		*merged = append(append(c.merged[:0], *first...), f.Data...)
		*first = nil
	default:
		*merged = append(*merged, f.Data...)
	}
	return nil
}

func (c *conn) writeBinary(b []byte) error { return c.w().Binary(b) }

// input handles a binary frame from the peer: keystrokes for a session,
// or a stream's frame. Problems are answered as errors; the connection
// stays. A frame over wire.MaxBinaryFrame is cut there, and ParseFrame
// refuses what is left.
func (c *conn) input(r io.Reader) {
	data, err := io.ReadAll(io.LimitReader(r, wire.MaxBinaryFrame+1))
	if err != nil {
		return
	}
	if c.thread == nil {
		return // before hello: ignored, the handshake will fail
	}
	f, err := wire.ParseFrame(data)
	if err == nil && wire.IsStreamFrame(f.Kind) {
		c.fwd.Frame(f) // forward.go
		return
	}
	if err == nil && f.Kind != wire.FrameInput {
		err = errors.New("only input frames travel towards the agent")
	}
	if err != nil {
		c.reply(wire.ErrorEnvelope(c.thread.name, "", wire.CodeBadMessage, "%v", err))
		return
	}
	s, err := c.s.terminals().Get(f.Session)
	if err == nil {
		err = s.Write(f.Data)
	}
	if err != nil {
		c.reply(wire.ErrorEnvelope(c.thread.name, "", terminalCode(err), "terminal input: %v", err))
	}
}

// terminal handles one terminal control request.
func (c *conn) terminal(env wire.Envelope) {
	name := c.thread.name
	reg := c.s.terminals()
	fail := func(err error) {
		c.reply(wire.ErrorEnvelope(name, env.ID, terminalCode(err), "%s: %v", env.Type, err))
	}
	switch env.Type {
	case wire.TypeTerminalOpen:
		var o wire.TerminalOpen
		if err := decodeIf(env, &o); err != nil {
			fail(err)
			return
		}
		if _, err := reg.Open(o, c, env.ID); err != nil { // c watches from the first byte
			fail(err)
		}
	case wire.TypeTerminalList:
		c.reply(wire.MustNew(wire.TypeTerminalSessions, name, env.ID, wire.TerminalSessions{Sessions: reg.List()}))
	case wire.TypeTerminalAttach, wire.TypeTerminalDetach, wire.TypeTerminalClose, wire.TypeTerminalResize, wire.TypeTerminalSignal:
		c.terminalSession(reg, env, fail)
	default:
		c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "%q is not a request", env.Type))
	}
}

// terminalSession handles the requests that name a session.
func (c *conn) terminalSession(reg *terminal.Registry, env wire.Envelope, fail func(error)) {
	var p struct {
		wire.TerminalResize
		Signal string `json:"signal"`
	}
	if err := env.Decode(&p); err != nil {
		fail(err)
		return
	}
	s, err := reg.Get(p.Session)
	if err != nil {
		fail(err)
		return
	}
	switch env.Type {
	case wire.TypeTerminalAttach:
		s.Attach(c, env.ID)
	case wire.TypeTerminalDetach:
		s.Detach(c)
		c.Send(wire.MustNew(wire.TypeTerminalDetached, "", env.ID, wire.TerminalDetached{Session: p.Session, Reason: wire.DetachRequested}))
	case wire.TypeTerminalClose:
		if err := reg.CloseSession(p.Session); err != nil && !errors.Is(err, terminal.ErrNotFound) {
			c.log.Debug("close terminal", "session", p.Session, "err", err)
		}
		c.Send(wire.MustNew(wire.TypeTerminalClosed, "", env.ID, wire.TerminalRef{Session: p.Session}))
	case wire.TypeTerminalResize:
		err = s.Resize(p.Cols, p.Rows)
	case wire.TypeTerminalSignal:
		err = s.Signal(p.Signal)
	}
	if err != nil {
		fail(err)
	}
}

// decodeIf decodes env's payload into v when it has one.
func decodeIf(env wire.Envelope, v any) error {
	if len(env.Data) == 0 {
		return nil
	}
	return env.Decode(v)
}

func terminalCode(err error) wire.Code {
	switch {
	case errors.Is(err, terminal.ErrNotFound):
		return wire.CodeNotFound
	case errors.Is(err, terminal.ErrClosed):
		return wire.CodeInternal
	default:
		return wire.CodeBadMessage
	}
}

// detachTerminals detaches a closing connection from every session; the
// sessions go on.
func (s *Server) detachTerminals(c *conn) {
	if reg := s.terms.get(); reg != nil {
		reg.DetachAll(c)
	}
}
