package session

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

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

// DefaultCheckReconnectWait is how long a tool check waits for a bridge
// connection to come back after the one it waited on closed
// (Config.CheckReconnectWait).
const DefaultCheckReconnectWait = 5 * time.Minute

// checkTool is the loop's Check. It blocks until the bridge answers or ctx
// ends (refused). When the bridge connection closes first, the check
// waits for the thread's next bridge connection (the same bridge back,
// or another that took the thread over) and is asked again there with
// the same id, which names the same approval on the bridge
// (docs/approvals.md, "Across bridges"); it is refused when none comes
// within Config.CheckReconnectWait. The approval's own expiry is the
// bridge's to apply.
func (s *Server) checkTool(ctx context.Context, call loop.ToolCall) (bool, string) {
	t, _ := ctx.Value(threadKey{}).(*thread)
	if t == nil {
		return true, ""
	}
	args := []byte(call.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	id, ch := s.checks.add()
	defer s.checks.remove(id)
	env := wire.MustNew(wire.TypeToolCheck, t.name, id, wire.ToolCheck{CallID: call.ID, Name: call.Name, Arguments: args})
	wait := s.cfg.CheckReconnectWait
	if wait <= 0 {
		wait = DefaultCheckReconnectWait
	}
	var gone *time.Timer // runs while no bridge connection is there to ask
	defer func() {
		if gone != nil {
			gone.Stop()
		}
	}()
	for {
		c, refused := t.sendCheck(ctx, env)
		if c == nil && !t.bridged() {
			return true, "" // standalone: nobody to ask
		}
		if ctx.Err() != nil {
			return false, "interrupted while waiting for approval"
		}
		var closed, wake <-chan struct{}
		if c != nil && refused == "" {
			closed = c.done
			if gone != nil {
				gone.Stop()
				gone = nil
			}
		} else {
			wake = t.bridgeWake()
			if gone == nil {
				gone = time.NewTimer(wait)
			}
		}
		var expired <-chan time.Time
		if gone != nil {
			expired = gone.C
		}
		select {
		case v := <-ch:
			return v.Allowed, v.Reason
		case <-ctx.Done():
			return false, "interrupted while waiting for approval"
		case <-closed: // ask again on the next bridge connection
		case <-wake:
		case <-expired:
			return false, fmt.Sprintf("the bridge connection closed while the call waited for approval, and no bridge came back within %s", wait)
		}
	}
}

// bridged reports whether a bridge has ever resumed the thread: a check
// then waits for a bridge rather than running unchecked.
func (t *thread) bridged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hadBridge
}

// bridgeWake returns a channel closed when a bridge connection of the
// thread is resumed, or a closed one when a live bridge connection is
// there already (sendCheck waits for its resume).
func (t *thread) bridgeWake() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	for b := range t.conns {
		select {
		case <-b.done:
			continue
		default:
		}
		if b.role == wire.RoleBridge {
			return closedChan
		}
	}
	if t.resumeWake == nil {
		t.resumeWake = make(chan struct{})
	}
	return t.resumeWake
}

// closedChan is always ready.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// resumeWait bounds waiting for a bridge connection to send resume before
// a tool check goes to it anyway (a bridge that does not resume).
const resumeWait = 10 * time.Second

// sendCheck queues the tool_check env on a bridge connection of the
// thread, under the thread's lock and only once that connection has been
// resumed: so the check follows the replay, which may hold its tool_call,
// and the bridge logs the tool_call before the approval_request. It waits
// (at most resumeWait, or until ctx ends or the connection closes) while
// the thread's bridge connection has not been resumed. c is nil when the
// thread has no bridge connection; refused says why the check was not
// queued (empty: it was).
func (t *thread) sendCheck(ctx context.Context, env wire.Envelope) (c *conn, refused string) {
	timer := time.NewTimer(resumeWait)
	defer timer.Stop()
	late := false
	for {
		t.mu.Lock()
		var waiting *conn
		for b := range t.conns {
			if b.role != wire.RoleBridge {
				continue
			}
			if b.resumed || late {
				sent := b.enqueue(outgoing{env: env})
				t.mu.Unlock()
				if !sent {
					return b, "the bridge connection is gone; the call was not checked"
				}
				return b, ""
			}
			waiting = b
		}
		if waiting == nil {
			t.mu.Unlock()
			return nil, ""
		}
		if t.resumeWake == nil {
			t.resumeWake = make(chan struct{})
		}
		wake := t.resumeWake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-waiting.done:
			return waiting, "the bridge connection closed before the call could be checked"
		case <-timer.C:
			t.log.Warn("bridge connection has not resumed; tool check sent anyway")
			late = true
		case <-ctx.Done():
			return waiting, "interrupted while waiting for approval"
		}
	}
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
