package server

import (
	"context"
	"sync"

	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Host tools (docs/tools.md) are bridge/hosttools': the agent asks which
// host tools its thread may use (host_tools_list) and sends each call
// (host_call); here the thread answers them on goroutines it owns, scoped
// to its image, owner and id, and cancels a call when the agent says so
// (host_cancel), the agent connection drops or the thread ends.

// hostCalls are a thread's running host calls' cancels, by request id.
type hostCalls struct {
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// hostTool handles an agent's host tool message; it reports whether env
// was one.
func (t *thread) hostTool(env wire.Envelope) bool {
	if !wire.IsHostTool(env.Type) {
		return false
	}
	h := t.srv.cfg.HostTools
	switch env.Type {
	case wire.TypeHostToolsList:
		t.goHost(env.ID, func(ctx context.Context) {
			list := wire.HostTools{}
			if h != nil {
				list = h.Tools(ctx, t.hostScope(ctx))
			}
			list.MCPServers = t.threadMCP(ctx) // mcpservers.go: the thread's own, run in the sandbox
			t.sendAgent(wire.MustNew(wire.TypeHostTools, t.id, env.ID, list))
		})
	case wire.TypeHostCall:
		var call wire.HostCall
		if err := env.Decode(&call); err != nil || call.Name == "" {
			t.sendAgent(wire.MustNew(wire.TypeHostResult, t.id, env.ID, wire.HostResult{Error: "bad host_call: it needs a name and arguments"}))
			return true
		}
		t.goHost(env.ID, func(ctx context.Context) {
			res := wire.HostResult{Error: "this bridge has no host tools"}
			if h != nil {
				res = h.Call(ctx, t.hostScope(ctx), call, func(msg string) {
					t.sendAgent(wire.MustNew(wire.TypeHostProgress, t.id, env.ID, wire.HostProgress{Message: msg}))
				})
			}
			t.log.Info("host tool call", "tool", call.Name, "call", call.CallID, "failed", res.Error != "", "redacted", res.Redacted)
			t.sendAgent(wire.MustNew(wire.TypeHostResult, t.id, env.ID, res))
		})
	case wire.TypeHostCancel:
		t.host.mu.Lock()
		cancel := t.host.running[env.ID]
		t.host.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		t.log.Debug("host tool message the bridge does not take from its agent", "type", env.Type)
	}
	return true
}

// goHost runs work on a goroutine owned by the thread, with a context
// that ends when the agent cancels request id, the agent connection
// drops or the thread ends.
func (t *thread) goHost(id string, work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(t.ctx)
	t.host.mu.Lock()
	if t.host.running == nil {
		t.host.running = map[string]context.CancelFunc{}
	}
	t.host.running[id] = cancel
	t.host.mu.Unlock()
	dead := t.deadCh()
	t.wg.Add(2) // the link's reader, also in wg, is running: shutdown cannot be waiting yet
	go func() {
		defer t.wg.Done()
		select {
		case <-dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	go func() {
		defer t.wg.Done()
		defer func() {
			t.host.mu.Lock()
			delete(t.host.running, id)
			t.host.mu.Unlock()
			cancel() // ends the watcher above
		}()
		work(ctx)
	}()
}

// hostScope is what the host tools' limits look at for this thread.
func (t *thread) hostScope(ctx context.Context) hosttools.Scope {
	return hosttools.Scope{
		Image: t.box.Image(), User: t.srv.users.OwnerOf(ctx, t.id), Thread: t.id,
		Redact: t.gate.Policy().Redactor().Redact, // the thread's policy's secrets too
	}
}
