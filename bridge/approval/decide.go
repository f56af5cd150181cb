package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// storeWait bounds each store call of a decision.
const storeWait = 10 * time.Second

// pending is one approval request, asked on the threads of gates; the
// first settle wins.
type pending struct {
	id     string
	action wire.ApprovalAction
	rule   string
	gates  []*Gate

	mu    sync.Mutex
	done  chan struct{} // closed by the first decide
	final wire.ApprovalDecision
	timer *time.Timer // denies it at its expiry; stopped when decided or the thread ends
}

func newPending(id string, action wire.ApprovalAction, rule string, gates []*Gate) *pending {
	return &pending{id: id, action: action, rule: rule, gates: gates, done: make(chan struct{})}
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
	p.final = d
	close(p.done)
	if p.timer != nil {
		p.timer.Stop()
	}
	return true
}

func (p *pending) decision() wire.ApprovalDecision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.final
}

// expireAt denies p by timeout at the time given (at once when it passed).
func (p *pending) expireAt(at time.Time, timeout time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	p.timer = time.AfterFunc(time.Until(at), func() {
		// A gate whose context ended stops its timers (stopTimers, from
		// context.AfterFunc, so later than the end): a timer firing in
		// between, with every gate of p ended, leaves the approval to the
		// bridge that relays next, as a stopped one does.
		if p.gatesEnded() {
			return
		}
		p.settle(context.Background(), wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByTimeout,
			Reason: fmt.Sprintf("no answer within %s", timeout)})
	})
}

// gatesEnded reports whether every gate of p has a context and it ended.
func (p *pending) gatesEnded() bool {
	for _, g := range p.gates {
		if g.cfg.Ctx == nil || g.cfg.Ctx.Err() == nil {
			return false
		}
	}
	return true
}

// stopTimer stops p's expiry without deciding it (its thread ended; the
// approval waits in the store for the bridge that relays it next).
func (p *pending) stopTimer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
}

// settle decides p with d unless it is decided already: in the store first
// (when the gates keep one), where the first decision of any bridge wins,
// then here. The decision that stands is published on every thread of p
// as the audit record. won reports whether d is that decision.
func (p *pending) settle(ctx context.Context, d wire.ApprovalDecision) (won bool) {
	d.ApprovalID, d.ApprovalAction, d.Rule = p.id, p.action, p.rule
	d.At = time.Now().UTC().Format(time.RFC3339)
	won = true
	cfg := p.gates[0].cfg
	if cfg.Store != nil {
		ctx, cancel := context.WithTimeout(ctx, storeWait)
		a, first, err := cfg.Store.DecideApproval(ctx, p.id, d)
		cancel()
		switch {
		case err == nil && !first && a.Decision != nil: // another bridge's answer, or its timeout, came first
			d, won = *a.Decision, false
		case err != nil && !errors.Is(err, store.ErrNoApproval):
			cfg.log().Warn("approval decided here only: the store did not take it", "approval", p.id, "err", err)
		}
	}
	if !p.decide(d) {
		return false
	}
	for _, g := range p.gates {
		g.finish(p)
	}
	return won
}

func newApprovalID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "ap_" + hex.EncodeToString(b)
}

// checkApprovalID is the approval id of an agent's tool check: the same
// for the same check asked again (after the agent's bridge connection
// came back, to this bridge or another), different for any other. key
// names the asking agent's check (Gate.CheckTool).
func checkApprovalID(thread, key, callID string) string {
	sum := sha256.Sum256([]byte(thread + "\x00" + key + "\x00" + callID))
	return "ap_" + hex.EncodeToString(sum[:6])
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
// (denied), or ctx ends (denied: the held request is gone).
func ask(ctx context.Context, gates []*Gate, action wire.ApprovalAction, d policy.Decision, timeout time.Duration) (bool, string) {
	if len(gates) == 0 {
		return false, "approval needed, but no thread is there to ask"
	}
	p := open(ctx, newApprovalID(), gates, action, d, timeout, "")
	select {
	case <-p.done:
	case <-ctx.Done():
		p.settle(context.WithoutCancel(ctx), wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByShutdown,
			Reason: "the request was cancelled while it waited for approval"})
	}
	return verdictOf(p.decision())
}

// verdictOf is a decision as the verdict and the reason given when denied.
func verdictOf(final wire.ApprovalDecision) (bool, string) {
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
