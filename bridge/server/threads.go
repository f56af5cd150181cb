package server

import (
	"context"
	"errors"
	"time"

	"github.com/boxwire/boxwire/bridge/internal/exitlog"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// deleteTimeout bounds carrying out one DELETE of a thread, whether or not
// its client waits (the engine retries removals under load).
const deleteTimeout = 2 * time.Minute

// removeThread detaches t from the server and its box, closes its clients
// with final, forgets its record and, when t owned its box alone (thread
// scope), removes the sandbox and everything that goes with it. A thread
// already removed is not an error.
func (s *Server) removeThread(ctx context.Context, t *thread, final wire.Envelope) error {
	s.mu.Lock()
	if s.threads[t.id] == t {
		delete(s.threads, t.id)
	}
	own := s.fleet.Release(t.box, t.id)
	s.mu.Unlock()
	t.shutdown(final)
	err := s.cfg.Store.Delete(ctx, t.id)
	if own {
		err = errors.Join(err, s.fleet.Remove(ctx, t.box))
	}
	return err
}

// logExit tells the operator why sb stopped: msg and what its agent wrote
// last (bridge/internal/exitlog). It blocks for at most inspectWait.
func (t *thread) logExit(sb sandbox.Sandbox, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	exitlog.Log(ctx, t.mgr, t.log, sb, msg)
}
