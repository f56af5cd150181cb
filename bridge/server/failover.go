package server

import (
	"github.com/boxwire/boxwire/bridge/wire"
)

// Fail-over between bridges on a shared store (issue 22, docs/store.md
// "Fail-over"): the lease renewer hands letGo the threads whose lease
// another bridge took.

// closeMoved is the close text of a client whose thread another bridge
// relays now; the close code is closeGoingAway, so it reconnects (to any
// bridge, with after_seq).
const closeMoved = "thread moved to another bridge: reconnect"

// letGo stops relaying thread id, whose lease another bridge took: its
// clients are closed (1001, closeMoved), its agent connection ends
// without the loss being handled (no sandbox_exited, no replacement), and
// its box leaves the fleet with its sandbox, workspace volume and folders
// left to the new relay (fleet.LetGo). Nothing is written to the thread's
// log. A thread not registered here is ignored.
func (s *Server) letGo(id string) {
	unlock := s.fleet.LockThread(id)
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
		c.kick(closeGoingAway, closeMoved, nil)
	}
	t.mu.Unlock()
	t.shutdown(wire.Envelope{})
	if err := s.fleet.LetGo(t.box, id); err != nil {
		t.log.Error("let go of the sandbox of a thread another bridge relays", "err", err)
	}
	t.log.Warn("stopped relaying the thread: another bridge holds its lease", "box", t.box.ID())
}
