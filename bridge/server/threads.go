package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// lifecycleDefaults fills the one lifecycle field the server reads
// itself (ThreadTTL, for a suspended thread's expiry); the fleet fills the
// rest of them (fleet.Config).
func lifecycleDefaults(cfg Config) Config {
	if cfg.ThreadTTL <= 0 {
		cfg.ThreadTTL = DefaultThreadTTL
	}
	return cfg
}

// info describes t, asking the engine whether its sandbox runs.
func (s *Server) info(ctx context.Context, t *thread) wire.ThreadInfo {
	b := t.box
	st := s.fleet.Status(b) // recycling changes the lifetime and image id
	t.mu.Lock()
	n := len(t.clients)
	t.mu.Unlock()
	status := wire.SandboxRunning
	ctx, cancel := context.WithTimeout(ctx, inspectWait)
	defer cancel()
	sandboxID := b.SandboxID()
	if sb, err := s.cfg.Manager.Inspect(ctx, sandboxID); err != nil || !sb.Running {
		status = wire.SandboxExitedStatus
	}
	return wire.ThreadInfo{
		ID: t.id, Scope: b.Scope(), Assistant: b.Assistant(), Image: b.Image(), Runtime: b.Runtime(),
		Status: status, SandboxID: sandboxID, Created: t.created, Expires: st.Expires, ImageID: st.ImageID,
		IdleExpires: st.IdleExpires, Clients: n, Egress: st.Egress, Owner: s.users.OwnerOf(ctx, t.id),
		AgentVersion: st.Agent.Version, AgentHash: st.Agent.Hash, Posture: st.Agent.Posture,
	}
}

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

// exitEvent describes a stopped sandbox for its clients (fleet.ExitEvent).
func exitEvent(sb sandbox.Sandbox) wire.SandboxExited { return fleet.ExitEvent(sb) }

// Of a dead sandbox's log the bridge reads the last exitLogRead lines and
// logs exitLogLines of them: from the start of a Go crash report ("panic:",
// "fatal error:", "runtime: ..."), whose first lines say why, or else the
// last ones.
const (
	exitLogRead  = 400
	exitLogLines = 30
)

// logExit tells the operator why sb stopped: msg and what its agent wrote
// last (a panic, a Go runtime's fatal error), which clients are not sent.
// It blocks for at most inspectWait.
func (t *thread) logExit(sb sandbox.Sandbox, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	tail, err := t.mgr.Logs(ctx, sb.ID, exitLogRead)
	if err != nil {
		t.log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "logs_err", err)
		return
	}
	t.log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "agent_log", crashLines(tail, exitLogLines))
}

// crashLines returns n lines of log: from the first line that starts a Go
// crash report, else the last n.
func crashLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") ||
			strings.HasPrefix(l, "runtime: ") || strings.HasPrefix(l, "runtime/cgo: ") {
			return strings.Join(lines[i:min(i+n, len(lines))], "\n")
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
