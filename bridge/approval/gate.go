package approval

import (
	"context"
	"encoding/json"
	"strings"
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

	cfg Config // where its approvals are kept (durable.go)

	mu      sync.Mutex
	pending map[string]*pending
	recent  map[string]recentDecision // decided lately, by id (durable.go)

	// restoring is held while an approval is found in or taken from the
	// store (durable.go), so two takers do not both adopt one.
	restoring sync.Mutex

	held heldTails
}

// NewGate returns the gate of thread id under the bridge's policy base
// (nil allows every tool call and redacts the built-in patterns).
// publish puts an event on the thread's event path (approval requests and
// decisions); the gate calls it holding none of its locks. cfg, when
// given, keeps its approvals in a store (durable.go); the first one counts.
func NewGate(id string, base *policy.Policy, publish func(wire.Envelope), cfg ...Config) *Gate {
	g := &Gate{thread: id, base: base, publish: publish}
	if len(cfg) > 0 {
		g.cfg = cfg[0]
	}
	if g.cfg.Ctx != nil {
		context.AfterFunc(g.cfg.Ctx, g.stopTimers)
	}
	return g
}

// stopTimers stops the expiry of every pending approval, deciding none.
func (g *Gate) stopTimers() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.pending {
		p.stopTimer()
	}
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

func (g *Gate) get(id string) *pending {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending[id]
}

// CheckTool decides an agent's tool_check: the policy decides, asking the
// thread's clients when it says to. key names the agent's check (its
// sandbox and request id, the same when the agent asks again on a new
// bridge connection; "" for none): a check asked again joins its pending
// approval, or gets the decision it came to, on this bridge or, through
// the store, on the one that asked first (durable.go). It blocks until a
// client answers or the approval expires (denied); when ctx ends first
// it returns decided false and leaves the approval pending, for the
// agent's next connection to ask about again.
func (g *Gate) CheckTool(ctx context.Context, chk wire.ToolCheck, key string) (v wire.ToolVerdict, decided bool) {
	pol := g.Policy()
	action := wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: chk.Name, CallID: chk.CallID, Arguments: chk.Arguments}
	d := pol.Tool(chk.Name, json.RawMessage(chk.Arguments))
	if d.Action != policy.Ask {
		ok, reason := Decide(ctx, []*Gate{g}, pol, action, d)
		return wire.ToolVerdict{Allowed: ok, Reason: reason}, true
	}
	id := newApprovalID()
	if key != "" {
		id = checkApprovalID(g.thread, key, chk.CallID)
	}
	sandbox, _, _ := strings.Cut(key, "/")
	p, final := g.find(ctx, id, action, d, pol.Timeout(), sandbox)
	if final == nil {
		select {
		case <-p.done:
			dec := p.decision()
			final = &dec
		case <-ctx.Done():
			return wire.ToolVerdict{}, false
		}
	}
	ok, reason := verdictOf(*final)
	return wire.ToolVerdict{Allowed: ok, Reason: reason}, true
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
// of any bridge winning (through the store, when the gate keeps one);
// tool_check and tool_verdict are refused (only the agent and the bridge
// speak them). ok is false when env is none of these types. It blocks
// while the store takes the decision.
func (g *Gate) Answer(ctx context.Context, env wire.Envelope, by string) (a Answered, ok bool) {
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
	if p == nil {
		p = g.stored(ctx, ans.ApprovalID) // asked by a bridge that relayed the thread before (durable.go)
	}
	if p == nil || !p.settle(ctx, wire.ApprovalDecision{Verdict: verdict, By: by, Reason: ans.Reason}) {
		return refuse(wire.CodeNotFound, "no pending approval %q on this thread (already decided or expired)", ans.ApprovalID)
	}
	return Answered{ApprovalID: ans.ApprovalID, Verdict: verdict}, true
}
