package approval

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Gate is one thread's approval state: its policy, the approval requests
// waiting for one of its clients, and the output tails kept back for
// redaction (redact.go). Make it with NewGate.
type Gate struct {
	thread  string
	base    *policy.Policy // the bridge's
	publish func(wire.Envelope)
	own     atomic.Pointer[policy.Policy] // the thread's own; nil: base

	mu      sync.Mutex
	pending map[string]*pending

	held heldTails
}

// NewGate returns the gate of thread id under the bridge's policy base
// (nil allows every tool call and redacts the built-in patterns).
// publish puts an event on the thread's event path (approval requests and
// decisions); the gate calls it holding none of its locks.
func NewGate(id string, base *policy.Policy, publish func(wire.Envelope)) *Gate {
	return &Gate{thread: id, base: base, publish: publish}
}

// SetPolicy gives the thread a policy of its own (ThreadPolicy); nil
// goes back to the bridge's.
func (g *Gate) SetPolicy(p *policy.Policy) { g.own.Store(p) }

// Policy is the thread's policy: its own, else the bridge's.
func (g *Gate) Policy() *policy.Policy {
	if p := g.own.Load(); p != nil {
		return p
	}
	return g.base
}

func (g *Gate) add(p *pending) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[string]*pending{}
	}
	g.pending[p.id] = p
}

func (g *Gate) remove(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, id)
}

func (g *Gate) get(id string) *pending {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending[id]
}

// CheckTool decides an agent's tool_check: the policy decides, asking the
// thread's clients when it says to. It blocks until a client answers, the
// policy's timeout passes (denied) or ctx ends (denied).
func (g *Gate) CheckTool(ctx context.Context, chk wire.ToolCheck) wire.ToolVerdict {
	pol := g.Policy()
	action := wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: chk.Name, CallID: chk.CallID, Arguments: chk.Arguments}
	ok, reason := Decide(ctx, []*Gate{g}, pol, action, pol.Tool(chk.Name, json.RawMessage(chk.Arguments)))
	return wire.ToolVerdict{Allowed: ok, Reason: reason}
}

// Answered is what a client's approval message came to.
type Answered struct {
	// Refused, when set, is the error to send the client back; nothing
	// was decided.
	Refused *wire.Envelope
	// ApprovalID was decided with Verdict (wire.VerdictApproved or
	// wire.VerdictDenied) otherwise.
	ApprovalID, Verdict string
}

// Answer takes an approval message a client (connection id by) sent:
// approve and deny decide the pending request they name, the first answer
// winning; tool_check and tool_verdict are refused (only the agent and the
// bridge speak them). ok is false when env is none of these types.
func (g *Gate) Answer(env wire.Envelope, by string) (a Answered, ok bool) {
	refuse := func(code wire.Code, format string, args ...any) (Answered, bool) {
		e := wire.ErrorEnvelope(g.thread, env.ID, code, format, args...)
		return Answered{Refused: &e}, true
	}
	switch env.Type {
	case wire.TypeApprove, wire.TypeDeny:
	case wire.TypeToolCheck, wire.TypeToolVerdict:
		return refuse(wire.CodeBadMessage, "%s is between the agent and the bridge", env.Type)
	default:
		return Answered{}, false
	}
	var ans wire.ApprovalAnswer
	if err := env.Decode(&ans); err != nil || ans.ApprovalID == "" {
		return refuse(wire.CodeBadMessage, "%s needs an approval_id", env.Type)
	}
	verdict := wire.VerdictApproved
	if env.Type == wire.TypeDeny {
		verdict = wire.VerdictDenied
	}
	p := g.get(ans.ApprovalID)
	if p == nil || !p.decide(wire.ApprovalDecision{Verdict: verdict, By: by, Reason: ans.Reason}) {
		return refuse(wire.CodeNotFound, "no pending approval %q on this thread (already decided or expired)", ans.ApprovalID)
	}
	return Answered{ApprovalID: ans.ApprovalID, Verdict: verdict}, true
}
