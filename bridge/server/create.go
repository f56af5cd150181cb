package server

import (
	"context"
	"time"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/wire"
)

// createThread makes a new thread for req: it validates req, has the fleet
// find or create the sandbox and greet its agent (fleet.AcquireNew, which names it) and
// registers the thread. It blocks until the agent answers (at most the
// fleet's agent timeout) or ctx ends. On failure a sandbox made for this
// thread alone is removed.
func (s *Server) createThread(ctx context.Context, req wire.CreateThread) (*thread, error) {
	req.Assistant = users.AssistantFor(users.PrincipalOf(ctx), req.Assistant)
	o, err := s.fleet.Options(req)
	if err != nil {
		return nil, err
	}
	if err := s.users.CheckSandboxQuota(ctx); err != nil {
		return nil, err
	}
	pol, err := approval.ThreadPolicy(s.cfg.Policy, req.Policy) // the thread's own rules (bridge/approval)
	if err != nil {
		return nil, err
	}
	if err := checkThreadMCP(req.MCP); err != nil { // mcpservers.go
		return nil, err
	}
	o = s.fleet.WithSuspendedWorkspace(ctx, o)     // an assistant takes its suspended workspace back
	id, b, conn, err := s.fleet.AcquireNew(ctx, o) // the id too: a pooled sandbox's agent knows it already
	if err != nil {
		return nil, err
	}
	log := s.log.With("thread", id)
	defer s.fleet.Started(b) // the reaper left b alone while the thread started
	t := newThread(s, id, conn, b, 0, log)
	t.gate.SetPolicy(pol)
	s.fleet.Linked(b, id, b.SandboxID())
	// Under the box's lock, so a PATCH of the sandbox's egress rules
	// (bridge/threadops: SetEgress) finds this thread registered with the rules it
	// stored, or runs after.
	unlockBox := s.fleet.Locks().Box(b.ID())
	rec := ThreadRecord{ID: id, Box: b.ID(), Scope: b.Scope(), Assistant: b.Assistant(),
		Image: b.Image(), Runtime: b.Runtime(), Created: time.Now().UTC(), IdleTTL: b.IdleTTL(),
		Egress: s.fleet.Status(b).Egress, Policy: req.Policy, MCP: req.MCP, Owner: users.PrincipalOf(ctx).User}
	err = s.register(ctx, t, rec)
	unlockBox()
	if err == nil {
		s.users.Record(ctx, "thread.create", id, b.Image(), "")
		return t, nil
	}
	t.shutdown(wire.Envelope{})
	s.fleet.Abandon(ctx, b)
	return nil, err
}
