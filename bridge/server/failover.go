package server

import (
	"context"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/failover"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Fail-over between bridges on a shared store is bridge/failover's
// (docs/store.md, "Fail-over"): the lease renewer (leases.go) hands it the
// threads whose lease another bridge took and has it take the threads of
// bridges that are gone; a client's resume of such a thread takes it over
// too (suspend.go). Here the server is its failover.Threads (failThreads):
// it lets a thread go, and registers one in a sandbox fail-over adopted.

// newFailover is the server's fail-over, over its threads, fleet, store
// and leases; New makes it before the fleet, whose hooks use it.
func (s *Server) newFailover() *failover.Failover {
	_, shared := s.db.(store.Listener) // one bridge has the bbolt file
	return failover.New(failover.Config{
		BridgeID: s.cfg.BridgeID, Threads: failThreads{s}, Fleet: func() *fleet.Fleet { return s.fleet }, Records: s.cfg.Store, Store: s.db,
		Shared: shared, Leases: s.leases, Recheck: s.users.Recheck, Log: s.log,
	})
}

// failThreads is the server as its fail-over's failover.Threads.
type failThreads struct{ s *Server }

// Live returns the ids of the threads registered now.
func (f failThreads) Live() []string { return threadDirectory(f).Live() }

// Relays reports whether thread id is registered here.
func (f failThreads) Relays(id string) bool { return f.s.lookup(id) != nil }

// LetGo stops relaying thread id, whose lease another bridge took (or may
// have taken: failover.Failover.CutOff): its clients are closed (1001
// with text), its agent connection ends without the loss being handled
// (no sandbox_exited, no replacement), and its box leaves the fleet with
// its sandbox, workspace volume and folders left to the new relay
// (fleet.LetGo). Nothing is written to the thread's log. A thread not
// registered here is ignored.
func (f failThreads) LetGo(id, text string) {
	s := f.s
	unlock := s.fleet.Locks().Thread(id)
	defer unlock()
	s.mu.Lock()
	t := s.threads[id]
	if t != nil {
		delete(s.threads, id)
	}
	s.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	for _, c := range t.clients {
		c.kick(closeGoingAway, text, nil)
	}
	t.mu.Unlock()
	t.shutdown(wire.Envelope{})
	if err := s.fleet.LetGo(t.box, id); err != nil {
		t.log.Error("let go of the sandbox of a thread another bridge relays", "err", err)
	}
	t.log.Warn("stopped relaying the thread", "why", text, "box", t.box.ID())
}

// Adopt registers rec's thread on the agent greeted on conn in b, which
// has its conversation (takeBack).
func (f failThreads) Adopt(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec ThreadRecord) error {
	_, err := f.s.takeBack(ctx, b, conn, rec, f.s.log.With("thread", rec.ID))
	return err
}

// Resume registers rec's thread in b with its history (resumeIn), and
// says why in sandbox_replaced: it was suspended, or (remade) its shared
// sandbox was made again while no bridge relayed it.
func (f failThreads) Resume(ctx context.Context, b *fleet.Box, conn *websocket.Conn, rec ThreadRecord, remade bool) error {
	t, n, err := f.s.resumeIn(ctx, b, conn, rec)
	switch {
	case err != nil:
		return err
	case !remade:
		resumed(t, b, rec, n)
		return nil
	}
	t.log.Info("thread resumed in its shared sandbox, made again while no bridge relayed it", "box", b.ID(), "sandbox", b.SandboxID(), "history_events", n)
	t.publish(wire.MustNew(wire.TypeSandboxReplaced, rec.ID, "", wire.SandboxReplaced{
		Reason: wire.ExitDied, SandboxID: b.SandboxID(), Restored: n,
		Message: "the assistant's shared sandbox was made again while no bridge relayed this thread; workspace and conversation kept",
	}))
	return nil
}
