package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/hosttools"
)

// Host tools (docs/tools.md) are bridge/hosttools': the agent asks which
// host tools its thread may use (host_tools_list) and sends each call
// (host_call); the thread's hosttools.Calls answers them on goroutines
// the thread owns (its wg), scoped to its image, owner and id, and cancels
// a call when the agent says so (host_cancel), the agent connection drops
// or the thread ends.

// newHostCalls is the thread's answerer of its agent's host tool
// messages (bridge/hosttools.Calls), its goroutines in the thread's wg.
func (t *thread) newHostCalls() *hosttools.Calls {
	return &hosttools.Calls{Host: t.srv.cfg.HostTools, Thread: t.id, Scope: t.hostScope, Own: t.threadMCP,
		Send: t.sendAgent, Group: &t.wg, Log: t.log}
}

// hostScope is what the host tools' limits look at for this thread.
func (t *thread) hostScope(ctx context.Context) hosttools.Scope {
	return hosttools.Scope{
		Image: t.box.Image(), User: t.srv.users.OwnerOf(ctx, t.id), Thread: t.id,
		Redact: t.gate.Policy().Redactor().Redact, // the thread's policy's secrets too
	}
}
