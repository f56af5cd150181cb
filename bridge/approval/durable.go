package approval

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Approvals in the store (docs/approvals.md, "Across bridges"). A gate
// with a Config.Store writes every approval it asks (store.Approval) before
// it publishes the approval_request, and decides through the store, where
// the first decision of any bridge wins. So an approval outlives the
// bridge that asked: the bridge that relays the thread next restores it
// (Restore) with the same id and expiry, and an agent's tool check asked
// again after its bridge connection came back (CheckTool with the same
// key) finds it, pending or decided, instead of asking anew.

// recentKeep is how long a gate remembers a decision after it is made, for
// a tool check asked again (the store keeps it too, when there is one).
const recentKeep = 15 * time.Minute

// Config is where a gate keeps its approvals and how it reads its
// thread's log. The zero value keeps them in memory only.
type Config struct {
	// Store keeps the approvals where every bridge on it sees them.
	Store store.Approvals
	// Holder names this bridge process (store.Approval.Holder).
	Holder string
	// Last is the seq of the thread's newest event (store.Approval.After).
	Last func() uint64
	// Logged reports whether the thread's log holds an event of type typ
	// about approval id after seq after; false when it cannot tell.
	Logged func(ctx context.Context, after uint64, typ wire.Type, id string) bool
	// Ctx ends with the thread: the expiries of its pending approvals
	// stop, and the approvals stay undecided in the store for the bridge
	// that relays the thread next. Nil: never.
	Ctx context.Context
	// Log receives what could not be stored; nil discards.
	Log *slog.Logger
	// Secrets, when set, returns more values to mask in tool output
	// beside the policy's, asked at each redaction (the sandbox's live
	// LLM proxy tokens, which rotate).
	Secrets func() []string
}

func (c Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// recentDecision is a decision made lately on the gate.
type recentDecision struct {
	d  wire.ApprovalDecision
	at time.Time
}

// open registers a new approval id about action on every gate, writes it
// to the store, publishes its approval_request on every gate's thread and
// starts its expiry. sandbox names the agent's sandbox of a tool check.
func open(ctx context.Context, id string, gates []*Gate, action wire.ApprovalAction, d policy.Decision, timeout time.Duration, sandbox string) *pending {
	p := newPending(id, action, d.Rule, gates)
	now := time.Now()
	req := wire.ApprovalRequest{ApprovalID: id, ApprovalAction: action, Rule: d.Rule, Reason: d.Reason,
		Expires: now.Add(timeout).UTC().Format(time.RFC3339)}
	rec := store.Approval{ID: id, Request: req, Holder: gates[0].cfg.Holder, Sandbox: sandbox, Created: now.UTC(), After: map[string]uint64{}}
	for _, g := range gates {
		g.add(p)
		rec.Threads = append(rec.Threads, g.thread)
		if g.cfg.Last != nil {
			rec.After[g.thread] = g.cfg.Last()
		}
	}
	if cfg := gates[0].cfg; cfg.Store != nil {
		if err := cfg.Store.PutApproval(ctx, rec); err != nil {
			cfg.log().Warn("approval kept in memory only: the store did not take it", "approval", id, "err", err)
		}
	}
	for _, g := range gates {
		g.publish(wire.MustNew(wire.TypeApprovalRequest, g.thread, "", req))
	}
	p.expireAt(now.Add(timeout), timeout)
	return p
}

// finish takes a decided p off the gate, remembers its decision, and
// publishes it on the gate's thread.
func (g *Gate) finish(p *pending) {
	final := p.decision()
	g.mu.Lock()
	delete(g.pending, p.id)
	if g.recent == nil {
		g.recent = map[string]recentDecision{}
	}
	now := time.Now()
	for id, r := range g.recent {
		if now.Sub(r.at) > recentKeep {
			delete(g.recent, id)
		}
	}
	g.recent[p.id] = recentDecision{d: final, at: now}
	g.mu.Unlock()
	g.publish(wire.MustNew(wire.TypeApprovalDecision, g.thread, "", final))
}

// find returns the approval id of an agent's tool check: pending on this
// gate, decided (final), in the store (restored, or its decision), or
// else asked anew.
func (g *Gate) find(ctx context.Context, id string, action wire.ApprovalAction, d policy.Decision, timeout time.Duration, sandbox string) (p *pending, final *wire.ApprovalDecision) {
	g.restoring.Lock()
	defer g.restoring.Unlock()
	g.mu.Lock()
	p = g.pending[id]
	if r, ok := g.recent[id]; ok {
		final = &r.d
	}
	g.mu.Unlock()
	if p != nil || final != nil {
		return p, final
	}
	if st := g.cfg.Store; st != nil {
		a, ok, err := st.Approval(ctx, id)
		switch {
		case err != nil:
			g.cfg.log().Warn("look the tool check's approval up in the store", "approval", id, "err", err)
		case ok && a.Decision != nil: // decided by a bridge that relayed the thread before
			g.logged(ctx, a, wire.MustNew(wire.TypeApprovalDecision, g.thread, "", *a.Decision))
			return nil, a.Decision
		case ok:
			return g.adopt(ctx, a), nil
		}
	}
	return open(ctx, id, []*Gate{g}, action, d, timeout, sandbox), nil
}

// adopt takes over a's undecided approval, stored by a bridge that
// relayed the thread before (or this one, before a restart): its
// approval_request is published unless the log holds it, and it is denied
// at its expiry. The caller holds g.restoring.
func (g *Gate) adopt(ctx context.Context, a store.Approval) *pending {
	p := newPending(a.ID, a.Request.ApprovalAction, a.Request.Rule, []*Gate{g})
	g.add(p)
	g.logged(ctx, a, wire.MustNew(wire.TypeApprovalRequest, g.thread, "", a.Request))
	expires, err := time.Parse(time.RFC3339, a.Request.Expires)
	if err != nil {
		expires = time.Now()
	}
	p.expireAt(expires, expires.Sub(a.Created).Round(time.Second))
	return p
}

// logged publishes env, an approval_request or approval_decision of a,
// unless the thread's log holds it already.
func (g *Gate) logged(ctx context.Context, a store.Approval, env wire.Envelope) {
	if g.cfg.Logged != nil && g.cfg.Logged(ctx, a.After[g.thread], env.Type, a.ID) {
		return
	}
	g.publish(env)
}

// Restore takes back the thread's undecided approvals from the store when
// this bridge starts relaying it (a restart, a fail-over, a resume):
// each is pending again with its id and expiry, and its approval_request
// is published unless the log holds it, so the thread's clients can
// answer it here. A tool check whose sandbox is not sandbox, the thread's
// now, is denied (its agent is gone), and so is an egress request held by
// another bridge process (its connection went with it). It runs before
// the agent can ask again, or concurrently with CheckTool.
func (g *Gate) Restore(ctx context.Context, sandbox string) {
	st := g.cfg.Store
	if st == nil {
		return
	}
	as, err := st.Approvals(ctx, g.thread)
	if err != nil {
		g.cfg.log().Warn("restore the thread's pending approvals", "err", err)
		return
	}
	g.restoring.Lock()
	defer g.restoring.Unlock()
	for _, a := range as {
		tool := a.Request.Kind == wire.ApprovalTool
		if g.get(a.ID) != nil || (!tool && a.Holder == g.cfg.Holder) {
			continue // pending here already (an egress one on another thread's gate)
		}
		p := g.adopt(ctx, a)
		switch {
		case tool && a.Sandbox != sandbox:
			p.settle(ctx, wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByShutdown,
				Reason: "the sandbox that asked stopped before an answer came"})
		case !tool:
			p.settle(ctx, wire.ApprovalDecision{Verdict: wire.VerdictDenied, By: wire.ByShutdown,
				Reason: "the bridge that held the request stopped before an answer came"})
		default:
			g.cfg.log().Info("approval restored from the store", "approval", a.ID, "expires", a.Request.Expires)
		}
	}
}

// stored returns the approval id of this thread from the store, pending
// here from now on, when another bridge process asked it and nobody
// decided it yet: a client's answer that came before Restore took it.
func (g *Gate) stored(ctx context.Context, id string) *pending {
	if g.cfg.Store == nil {
		return nil
	}
	g.restoring.Lock()
	defer g.restoring.Unlock()
	if p := g.get(id); p != nil {
		return p
	}
	a, ok, err := g.cfg.Store.Approval(ctx, id)
	if err != nil || !ok || a.Decision != nil || a.Holder == g.cfg.Holder || !slices.Contains(a.Threads, g.thread) {
		return nil
	}
	return g.adopt(ctx, a)
}

// Events reads a thread's stored log (the event store's reader).
type Events interface {
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
}

// loggedBatch is how many events LoggedIn reads at a time.
const loggedBatch = 256

// LoggedIn is a Config.Logged that reads thread's log in events: whether
// it holds an event of type typ about approval id after seq after. When
// the log cannot be read it says yes (logged to log): the approval was
// stored before its events were published, so they are most likely
// logged, and a request twice in the log is what restoring must not do.
func LoggedIn(events Events, thread string, log *slog.Logger) func(ctx context.Context, after uint64, typ wire.Type, id string) bool {
	return func(ctx context.Context, after uint64, typ wire.Type, id string) bool {
		for ctx.Err() == nil {
			evs, err := events.Events(thread, after, loggedBatch)
			if err != nil {
				if log != nil {
					log.Warn("read the log for an approval", "approval", id, "err", err)
				}
				return true
			}
			if len(evs) == 0 {
				return false
			}
			for _, env := range evs {
				var ref struct {
					ApprovalID string `json:"approval_id"`
				}
				if env.Type == typ && env.Decode(&ref) == nil && ref.ApprovalID == id {
					return true
				}
				after = env.Seq
			}
		}
		return true
	}
}
