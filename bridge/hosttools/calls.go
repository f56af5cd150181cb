package hosttools

import (
	"context"
	"log/slog"
	"sync"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Calls answers one thread's agent's host tool messages: which host
// tools the thread may use (host_tools_list), each call (host_call), and
// the agent's cancel of one (host_cancel). Lists and calls run on
// goroutines counted in Group (the thread's, which its end waits for),
// each with a context that ends when the agent cancels the call, the
// agent connection that asked ends, or the thread's context ends. Set the
// fields before the first Handle; safe for concurrent use after.
type Calls struct {
	Host   *Host  // the bridge's host tools; nil: none
	Thread string // the thread's id, on every answer
	// Scope is what the host tools' limits look at for the thread.
	Scope func(ctx context.Context) Scope
	// Own is the MCP servers the thread itself declared, handed to the
	// agent with every list (they run in the sandbox).
	Own func(ctx context.Context) []wire.MCPServer
	// Send queues an answer for the agent.
	Send  func(wire.Envelope)
	Group *sync.WaitGroup
	Log   *slog.Logger // nil: discard

	mu      sync.Mutex
	running map[string]context.CancelFunc // by request id
}

// Handle takes env when it is a host tool message (wire.IsHostTool) and
// reports whether it was. ctx is the thread's; dead is closed when the
// agent connection env came on ends. It does not block. Call it from a
// goroutine counted in Group (the thread's agent reader), so that the
// thread's end, waiting for Group, cannot have begun to wait.
func (c *Calls) Handle(ctx context.Context, dead <-chan struct{}, env wire.Envelope) bool {
	if !wire.IsHostTool(env.Type) {
		return false
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch env.Type {
	case wire.TypeHostToolsList:
		c.run(ctx, dead, env.ID, func(ctx context.Context) {
			list := wire.HostTools{}
			if c.Host != nil {
				list = c.Host.Tools(ctx, c.Scope(ctx))
			}
			list.MCPServers = c.Own(ctx)
			c.Send(wire.MustNew(wire.TypeHostTools, c.Thread, env.ID, list))
		})
	case wire.TypeHostCall:
		var call wire.HostCall
		if err := env.Decode(&call); err != nil || call.Name == "" {
			c.Send(wire.MustNew(wire.TypeHostResult, c.Thread, env.ID, wire.HostResult{Error: "bad host_call: it needs a name and arguments"}))
			return true
		}
		c.run(ctx, dead, env.ID, func(ctx context.Context) {
			res := wire.HostResult{Error: "this bridge has no host tools"}
			if c.Host != nil {
				res = c.Host.Call(ctx, c.Scope(ctx), call, func(msg string) {
					c.Send(wire.MustNew(wire.TypeHostProgress, c.Thread, env.ID, wire.HostProgress{Message: msg}))
				})
			}
			log.Info("host tool call", "tool", call.Name, "call", call.CallID, "failed", res.Error != "", "redacted", res.Redacted)
			c.Send(wire.MustNew(wire.TypeHostResult, c.Thread, env.ID, res))
		})
	case wire.TypeHostCancel:
		c.mu.Lock()
		cancel := c.running[env.ID]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		log.Debug("host tool message the bridge does not take from its agent", "type", env.Type)
	}
	return true
}

// run runs work on a goroutine in Group, with a context that ends when
// the agent cancels request id, dead closes or ctx ends.
func (c *Calls) run(ctx context.Context, dead <-chan struct{}, id string, work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	if c.running == nil {
		c.running = map[string]context.CancelFunc{}
	}
	c.running[id] = cancel
	c.mu.Unlock()
	c.Group.Add(2)
	go func() {
		defer c.Group.Done()
		select {
		case <-dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	go func() {
		defer c.Group.Done()
		defer func() {
			c.mu.Lock()
			delete(c.running, id)
			c.mu.Unlock()
			cancel() // ends the watcher above
		}()
		work(ctx)
	}()
}
