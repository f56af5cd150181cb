package session

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// runTool runs a run_tool request on its own goroutine, tracked by the
// server like a turn, and emits the call's events to every connection on the
// thread with the request's id. It does not block and does not touch the
// conversation. interrupt stops it.
func (t *thread) runTool(c *conn, id string, req wire.RunTool) {
	t.mu.Lock()
	if t.repeatedLocked(c, id) { // accepted.go: a bridge sent it again
		t.mu.Unlock()
		return
	}
	if !t.s.track() {
		t.mu.Unlock()
		c.reply(wire.ErrorEnvelope(t.name, id, wire.CodeInternal, "the agent is shutting down"))
		return
	}
	t.acceptLocked(c, id)
	ctx, cancel := context.WithCancel(tools.WithThread(withThread(t.s.hard, t), t.name)) // the thread's remembered shell; host tools (hosttools.go)
	t.nextRun++
	n := t.nextRun
	if t.runs == nil {
		t.runs = make(map[uint64]context.CancelFunc)
	}
	t.runs[n] = cancel
	t.mu.Unlock()

	call := loop.ToolCall{ID: fmt.Sprintf("run_%d", n), Name: req.Name, Arguments: string(req.Arguments)}
	go func() {
		defer t.s.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.runs, n)
			t.mu.Unlock()
			cancel()
		}()
		res := t.s.loop.Direct(ctx, call, func(env wire.Envelope) { t.emit(id, env) })
		t.log.Debug("run_tool done", "id", id, "tool", req.Name, "err", res.Err)
	}()
}
