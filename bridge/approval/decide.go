package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// pending is one approval request; the first decide wins.
type pending struct {
	id     string
	action wire.ApprovalAction
	rule   string

	mu    sync.Mutex
	done  chan struct{} // closed by the first decide
	final wire.ApprovalDecision
}

// decide records d unless a decision was made already; it reports whether
// d won.
func (p *pending) decide(d wire.ApprovalDecision) bool {
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

func (p *pending) decision() wire.ApprovalDecision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.final
}

func newApprovalID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "ap_" + hex.EncodeToString(b)
}

// Decide applies the policy's decision d about action: allow, deny
// (audited when a rule decided), or ask the clients of the gates' threads.
// pol gives the asking timeout. It returns the verdict and, when denied, a
// reason for the model or the sandbox. Asking blocks as ask does.
func Decide(ctx context.Context, gates []*Gate, pol *policy.Policy, action wire.ApprovalAction, d policy.Decision) (bool, string) {
	switch d.Action {
	case policy.Ask:
		return ask(ctx, gates, action, d, pol.Timeout())
	case policy.Deny:
		audit(gates, action, d, false)
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
		audit(gates, action, d, true)
	}
	return true, ""
}

// ask publishes an approval_request for action on the thread of every
// gate and blocks until a client of one of them answers, timeout passes
// (denied), or ctx ends (denied). The decision is published on every
// thread as the audit record.
func ask(ctx context.Context, gates []*Gate, action wire.ApprovalAction, d policy.Decision, timeout time.Duration) (bool, string) {
	if len(gates) == 0 {
		return false, "approval needed, but no thread is there to ask"
	}
	p := &pending{id: newApprovalID(), action: action, rule: d.Rule, done: make(chan struct{})}
	for _, g := range gates {
		g.add(p)
		defer g.remove(p.id)
	}
	req := wire.ApprovalRequest{ApprovalID: p.id, ApprovalAction: action, Rule: d.Rule, Reason: d.Reason,
		Expires: time.Now().Add(timeout).UTC().Format(time.RFC3339)}
	for _, g := range gates {
		g.publish(wire.MustNew(wire.TypeApprovalRequest, g.thread, "", req))
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
	for _, g := range gates {
		g.publish(wire.MustNew(wire.TypeApprovalDecision, g.thread, "", final))
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

// audit publishes a policy's own decision about action on the gates'
// threads.
func audit(gates []*Gate, action wire.ApprovalAction, d policy.Decision, allowed bool) {
	verdict := wire.VerdictDenied
	if allowed {
		verdict = wire.VerdictApproved
	}
	dec := wire.ApprovalDecision{ApprovalAction: action, Verdict: verdict, By: wire.ByPolicy,
		At: time.Now().UTC().Format(time.RFC3339), Rule: d.Rule, Reason: d.Reason}
	for _, g := range gates {
		g.publish(wire.MustNew(wire.TypeApprovalDecision, g.thread, "", dec))
	}
}
