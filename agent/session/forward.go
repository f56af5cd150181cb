package session

import (
	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Port streams (agent/forward, docs/protocol.md "Ports and streams"): each
// connection has a Mux, made at its hello, and a queue of its own for the
// streams' control messages and frames, in order, beside the events and
// the terminals. Its writer drains that queue like the terminal one, so a
// stream's traffic never waits behind a slow terminal watcher, and each
// stream sends only what its peer gave it credit for.
const (
	// fwdQueueLen bounds the queued stream items of a connection: every
	// open stream's frames within its window, and control messages.
	fwdQueueLen = 8192
	// fwdBudget is the byte budget of a connection's stream frames.
	fwdBudget = 16 << 20
)

func newFwdQueue() *wire.Queue[wire.Envelope] {
	return wire.NewQueue[wire.Envelope](fwdQueueLen, fwdBudget)
}

// startForward makes c's stream Mux; the handshake calls it.
func (c *conn) startForward() {
	cfg := c.s.cfg.Forward
	cfg.Thread = c.thread.name
	if cfg.Logger == nil {
		cfg.Logger = c.log.With("component", "forward")
	}
	c.fwd = forward.New(cfg, c.fwdq)
}

// forward hands a stream control message to c's Mux.
func (c *conn) forward(env wire.Envelope) { c.fwd.Handle(env) }

// stopForward ends c's streams and waits for them (the connection ended).
func (c *conn) stopForward() {
	if c.fwd != nil {
		c.fwd.Close()
	}
}

// writeForward writes one item of the stream queue.
func (c *conn) writeForward(it termItem) error {
	c.fwdq.Release(it)
	if it.Msg != nil {
		return c.write(*it.Msg)
	}
	return c.writeBinary(it.Frame)
}

// watchPorts reports what listens in the sandbox to every thread, as a
// ports event, whenever it changes (Config.PortsInterval). It runs on a
// goroutine of the server's, started at the first connection.
func (s *Server) watchPorts() {
	if s.cfg.PortsInterval <= 0 {
		return
	}
	s.portsOnce.Do(func() {
		if !s.track() {
			return
		}
		go func() {
			defer s.wg.Done()
			forward.Watch(s.hard, s.cfg.Forward.Tables, s.cfg.PortsInterval, s.portsChanged)
		}()
	})
}

// portsChanged records ports and emits them to every thread.
func (s *Server) portsChanged(ports []wire.Port) {
	s.mu.Lock()
	s.ports = ports
	threads := make([]*thread, 0, len(s.threads))
	for _, t := range s.threads {
		threads = append(threads, t)
	}
	s.mu.Unlock()
	for _, t := range threads {
		t.emit("", wire.MustNew(wire.TypePorts, "", "", wire.Ports{Ports: ports}))
	}
}

// portsForNew emits what listens to a thread made after it began to.
func (s *Server) portsForNew(t *thread) {
	s.mu.Lock()
	ports := s.ports
	s.mu.Unlock()
	if len(ports) > 0 {
		t.emit("", wire.MustNew(wire.TypePorts, "", "", wire.Ports{Ports: ports}))
	}
}
