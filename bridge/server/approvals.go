package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// gate is a thread's approval state (docs/approvals.md): its policy (the
// bridge's, with the thread's own rules in front) and the approval
// requests waiting for one of its clients. The zero value uses a nil
// policy (every tool allowed, patterns redacted).
type gate struct {
	pol atomic.Pointer[policy.Policy] // the thread's own; nil: the bridge's

	mu      sync.Mutex
	pending map[string]*pendingApproval

	held heldTails // streamed output kept back for redaction (approvals_redact.go)
}

func (g *gate) set(p *policy.Policy) { g.pol.Store(p) }

// policy is the thread's policy: its own, else the bridge's.
func (t *thread) policy() *policy.Policy {
	if p := t.gate.pol.Load(); p != nil {
		return p
	}
	if t.srv != nil {
		return t.srv.cfg.Policy
	}
	return nil
}

func (g *gate) add(p *pendingApproval) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[string]*pendingApproval{}
	}
	g.pending[p.id] = p
}

func (g *gate) remove(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, id)
}

func (g *gate) get(id string) *pendingApproval {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending[id]
}

// pendingApproval is one approval request; the first decide wins.
type pendingApproval struct {
	id     string
	action wire.ApprovalAction
	rule   string

	mu    sync.Mutex
	done  chan struct{} // closed by the first decide
	final wire.ApprovalDecision
}

// decide records d unless a decision was made already; it reports whether
// d won.
func (p *pendingApproval) decide(d wire.ApprovalDecision) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	d.ApprovalID, d.ApprovalAction, d.Rule = p.id, p.action, p.rule
	d.At = time.Now().UTC().Format(time.RFC3339)
	p.final = d
	close(p.done)
	return true
}

func (p *pendingApproval) decision() wire.ApprovalDecision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.final
}

func newApprovalID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "ap_" + hex.EncodeToString(b)
}

// ask publishes an approval_request for action on every thread in threads
// and blocks until a client of one of them answers, timeout passes
// (denied), or ctx ends (denied). The decision is published on every
// thread as the audit record. It returns the verdict and, when denied, a
// reason for the model or the sandbox.
func ask(ctx context.Context, threads []*thread, action wire.ApprovalAction, d policy.Decision, timeout time.Duration) (bool, string) {
	if len(threads) == 0 {
		return false, "approval needed, but no thread is there to ask"
	}
	p := &pendingApproval{id: newApprovalID(), action: action, rule: d.Rule, done: make(chan struct{})}
	for _, t := range threads {
		t.gate.add(p)
		defer t.gate.remove(p.id)
	}
	req := wire.ApprovalRequest{ApprovalID: p.id, ApprovalAction: action, Rule: d.Rule, Reason: d.Reason,
		Expires: time.Now().Add(timeout).UTC().Format(time.RFC3339)}
	for _, t := range threads {
		t.publish(wire.MustNew(wire.TypeApprovalRequest, t.id, "", req))
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.decide(wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByTimeout,
			Reason: fmt.Sprintf("no answer within %s", timeout)})
	case <-ctx.Done():
		p.decide(wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByShutdown,
			Reason: "the request was cancelled while it waited for approval"})
	}
	final := p.decision()
	for _, t := range threads {
		t.publish(wire.MustNew(wire.TypeApprovalDecision, t.id, "", final))
	}
	if final.Verdict == wire.VerdictApproved {
		return true, ""
	}
	reason := "denied by " + final.By
	if final.Reason != "" {
		reason += ": " + final.Reason
	}
	return false, reason
}

// audit publishes a policy's own decision about action on threads.
func audit(threads []*thread, action wire.ApprovalAction, d policy.Decision, allowed bool) {
	verdict := wire.VerdictDenied
	if allowed {
		verdict = wire.VerdictApproved
	}
	dec := wire.ApprovalDecision{ApprovalAction: action, Verdict: verdict, By: wire.ByPolicy,
		At: time.Now().UTC().Format(time.RFC3339), Rule: d.Rule, Reason: d.Reason}
	for _, t := range threads {
		t.publish(wire.MustNew(wire.TypeApprovalDecision, t.id, "", dec))
	}
}

// decideWith applies d to action: allow, deny (audited when a rule
// decided), or ask the threads' clients.
func decideWith(ctx context.Context, threads []*thread, pol *policy.Policy, action wire.ApprovalAction, d policy.Decision) (bool, string) {
	switch d.Action {
	case policy.Ask:
		return ask(ctx, threads, action, d, pol.Timeout())
	case policy.Deny:
		audit(threads, action, d, false)
		reason := "denied by policy"
		if d.Rule != "" {
			reason += " rule " + d.Rule
		}
		if d.Reason != "" {
			reason += ": " + d.Reason
		}
		return false, reason
	}
	if d.Rule != "" {
		audit(threads, action, d, true)
	}
	return true, ""
}

// toolCheck answers an agent's tool_check on a goroutine owned by the
// thread: the policy decides, asking the clients when it says to.
func (t *thread) toolCheck(env wire.Envelope) {
	var chk wire.ToolCheck
	if err := env.Decode(&chk); err != nil {
		t.sendAgent(wire.MustNew(wire.TypeToolVerdict, t.id, env.ID, wire.ToolVerdict{Reason: "bad tool_check: " + err.Error()}))
		return
	}
	t.wg.Add(1) // readAgent, also in wg, is running: shutdown cannot be waiting yet
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped := make(chan struct{})
		dead := t.deadCh()
		go func() {
			defer close(stopped)
			select {
			case <-t.ctx.Done():
			case <-dead:
			case <-ctx.Done():
			}
			cancel()
		}()
		pol := t.policy()
		action := wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: chk.Name, CallID: chk.CallID, Arguments: chk.Arguments}
		ok, reason := decideWith(ctx, []*thread{t}, pol, action, pol.Tool(chk.Name, json.RawMessage(chk.Arguments)))
		cancel()
		<-stopped
		t.sendAgent(wire.MustNew(wire.TypeToolVerdict, t.id, env.ID, wire.ToolVerdict{Allowed: ok, Reason: reason}))
	}()
}

// sendAgent queues env for the agent unless the thread or agent stopped.
func (t *thread) sendAgent(env wire.Envelope) {
	select {
	case t.toAgent <- env:
	case <-t.ctx.Done():
	case <-t.deadCh():
	}
}

// approvalRequest handles the approval types a client may send: approve
// and deny are answered here; tool_check and tool_verdict are refused
// (only the agent and the bridge speak them). It reports whether env was
// one of them.
func (t *thread) approvalRequest(c *client, env wire.Envelope) bool {
	switch env.Type {
	case wire.TypeApprove, wire.TypeDeny:
	case wire.TypeToolCheck, wire.TypeToolVerdict:
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeBadMessage, "%s is between the agent and the bridge", env.Type))
		return true
	default:
		return false
	}
	var a wire.ApprovalAnswer
	if err := env.Decode(&a); err != nil || a.ApprovalID == "" {
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeBadMessage, "%s needs an approval_id", env.Type))
		return true
	}
	verdict := wire.VerdictApproved
	if env.Type == wire.TypeDeny {
		verdict = wire.VerdictDenied
	}
	p := t.gate.get(a.ApprovalID)
	if p == nil || !p.decide(wire.ApprovalDecision{Verdict: verdict, By: c.id, Reason: a.Reason}) {
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeNotFound,
			"no pending approval %q on this thread (already decided or expired)", a.ApprovalID))
		return true
	}
	t.log.Info("approval answered", "approval", a.ApprovalID, "verdict", verdict, "by", c.id)
	t.srv.record(c.ctx, "approval."+string(verdict), t.id, a.ApprovalID, "") // users.go
	return true
}

// redact masks secrets in tool output before an event is logged or sent.
func (t *thread) redact(env wire.Envelope) wire.Envelope {
	r := t.policy().Redactor()
	switch env.Type {
	case wire.TypeToolOutput:
		var o wire.ToolOutput
		if env.Decode(&o) == nil {
			if red := r.Redact(o.Output); red != o.Output {
				o.Output = red
				env.Data = wire.MustNew(env.Type, "", "", o).Data
			}
		}
	case wire.TypeToolResult:
		var o wire.ToolResult
		if env.Decode(&o) == nil {
			out, errText := r.Redact(o.Output), r.Redact(o.Error)
			if out != o.Output || errText != o.Error {
				o.Output, o.Error = out, errText
				env.Data = wire.MustNew(env.Type, "", "", o).Data
			}
		}
	}
	return env
}
