package session

import (
	"context"
	"strconv"
	"sync"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Tool checks (docs/approvals.md): before each of the model's tool calls
// the loop calls Server.checkTool, which sends tool_check to the thread's
// bridge connection and waits for its tool_verdict. A thread without a
// bridge connection (a standalone agent) allows every call. This is the
// cooperative layer: it guards against the model's mistakes, not against
// code running in the sandbox.

// threadKey carries the turn's thread in its context, for checkTool.
type threadKey struct{}

func withThread(ctx context.Context, t *thread) context.Context {
	return context.WithValue(ctx, threadKey{}, t)
}

// checks are the tool checks waiting for a verdict, by request id.
type checks struct {
	mu      sync.Mutex
	next    uint64
	waiting map[string]chan wire.ToolVerdict
}

func (cs *checks) add() (string, chan wire.ToolVerdict) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.waiting == nil {
		cs.waiting = map[string]chan wire.ToolVerdict{}
	}
	cs.next++
	id := "chk_" + strconv.FormatUint(cs.next, 10)
	ch := make(chan wire.ToolVerdict, 1)
	cs.waiting[id] = ch
	return id, ch
}

func (cs *checks) remove(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.waiting, id)
}

// deliver hands v to the check waiting under id; false if none is.
func (cs *checks) deliver(id string, v wire.ToolVerdict) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch, ok := cs.waiting[id]
	if ok {
		delete(cs.waiting, id)
		ch <- v // buffered, one send per id
	}
	return ok
}

// checkTool is the loop's Check. It blocks until the bridge answers, ctx
// ends (refused) or the bridge connection closes (refused).
func (s *Server) checkTool(ctx context.Context, call loop.ToolCall) (bool, string) {
	t, _ := ctx.Value(threadKey{}).(*thread)
	if t == nil {
		return true, ""
	}
	c := t.bridgeConn()
	if c == nil {
		return true, "" // standalone: nobody to ask
	}
	args := []byte(call.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	id, ch := s.checks.add()
	defer s.checks.remove(id)
	if !c.enqueue(outgoing{env: wire.MustNew(wire.TypeToolCheck, t.name, id, wire.ToolCheck{
		CallID: call.ID, Name: call.Name, Arguments: args,
	})}) {
		return false, "the bridge connection is gone; the call was not checked"
	}
	select {
	case v := <-ch:
		return v.Allowed, v.Reason
	case <-ctx.Done():
		return false, "interrupted while waiting for approval"
	case <-c.done:
		return false, "the bridge connection closed while the call waited for approval"
	}
}

// bridgeConn returns a connection of the thread whose hello said it is a
// bridge, or nil.
func (t *thread) bridgeConn() *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		if c.role == wire.RoleBridge {
			return c
		}
	}
	return nil
}

// verdict routes a tool_verdict from c; only a bridge connection may send one.
func (c *conn) verdict(env wire.Envelope) {
	var v wire.ToolVerdict
	if c.role != wire.RoleBridge {
		c.reply(wire.ErrorEnvelope(c.thread.name, env.ID, wire.CodeBadMessage, "only the bridge sends tool_verdict"))
		return
	}
	if err := env.Decode(&v); err != nil {
		c.reply(wire.ErrorEnvelope(c.thread.name, env.ID, wire.CodeBadMessage, "%s", err.Error()))
		return
	}
	if !c.s.checks.deliver(env.ID, v) {
		c.log.Debug("tool_verdict for no waiting check", "id", env.ID)
	}
}
