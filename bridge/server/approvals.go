package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Approvals (docs/approvals.md) are bridge/approval's: each thread has an
// approval.Gate (thread.gate), made by newThread. Here the thread and the
// server hand it what it decides on: an agent's tool_check, a client's
// approve or deny, a sandbox's egress request.

// newGate is the thread's approval gate, keeping its approvals in the
// store (approval.Config): an approval outlives this bridge, and another
// bridge relaying the thread next restores it (restoreApprovals).
func (t *thread) newGate() *approval.Gate {
	s := t.srv
	return approval.NewGate(t.id, s.cfg.Policy, t.Publish, approval.Config{
		Store: s.db, Holder: s.leases.Instance(), Last: t.committedSeq, Logged: approval.LoggedIn(t.store, t.id, t.log), Ctx: t.ctx, Log: t.log,
		Secrets: func() []string { return t.box.LLMTokens() }, // rotating: asked each time
	})
}

// restoreApprovals takes back the thread's undecided approvals from the
// store (approval.Gate.Restore) on a goroutine of the thread's, once its
// link has started.
func (t *thread) restoreApprovals() {
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(t.ctx, restoreWait)
	defer cancel()
	t.gate.Restore(ctx, t.box.SandboxID())
}

// restoreWait bounds restoring a thread's approvals.
const restoreWait = 30 * time.Second

// toolCheck answers an agent's tool_check on a goroutine owned by the
// thread: the policy decides, asking the clients when it says to
// (approval.Gate.CheckTool). When the agent connection ends or the thread
// stops first, no verdict is sent: the approval stays pending (in the
// store too), and the agent asks again with the same id on its next
// bridge connection, to this bridge or the one relaying the thread then.
func (t *thread) toolCheck(env wire.Envelope) {
	var chk wire.ToolCheck
	if err := env.Decode(&chk); err != nil {
		t.sendAgent(wire.MustNew(wire.TypeToolVerdict, t.id, env.ID, wire.ToolVerdict{Reason: "bad tool_check: " + err.Error()}))
		return
	}
	key := t.box.SandboxID() + "/" + env.ID // the agent's check: the same when it asks again
	t.wg.Add(1)                             // readAgent, also in wg, is running: shutdown cannot be waiting yet
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithCancel(t.ctx)
		defer cancel()
		stopped := make(chan struct{})
		dead := t.deadCh()
		go func() {
			defer close(stopped)
			select {
			case <-dead:
			case <-ctx.Done():
			}
			cancel()
		}()
		verdict, decided := t.gate.CheckTool(ctx, chk, key)
		cancel()
		<-stopped
		if !decided {
			return
		}
		t.sendAgent(wire.MustNew(wire.TypeToolVerdict, t.id, env.ID, verdict))
	}()
}

// sendAgent queues env for the agent unless the thread or agent stopped
// (then it is dropped); it waits for room as long as neither does.
func (t *thread) sendAgent(env wire.Envelope) {
	_ = t.link.Send(env, 0)
}

// approvalRequest handles the approval types a client may send
// (approval.Gate.Answer): approve and deny are answered and audited;
// tool_check and tool_verdict are refused. It reports whether env was one
// of them.
func (t *thread) approvalRequest(c *client, env wire.Envelope) bool {
	a, ok := t.gate.Answer(c.ctx, env, c.id)
	switch {
	case !ok:
		return false
	case a.Refused != nil:
		c.enqueue(*a.Refused)
	default:
		t.log.Info("approval answered", "approval", a.ApprovalID, "verdict", a.Verdict, "by", c.id)
		t.srv.users.Record(c.ctx, "approval."+a.Verdict, t.id, a.ApprovalID, "")
	}
	return true
}

// HeldSnapshot encodes the output tails the gate keeps back for redaction
// (agentlink.Thread: stored with the cursor).
func (t *thread) HeldSnapshot() json.RawMessage { return t.gate.HeldSnapshot() }

// RestoreHeld takes back the held tails of a stored cursor
// (agentlink.Thread); it runs before the link starts.
func (t *thread) RestoreHeld(data json.RawMessage) { t.gate.RestoreHeld(data) }

// egressCheck decides one egress request of sandbox id (the fleet's
// Config.Check): approval.CheckEgress over the gates of the sandbox's
// threads, whose clients are asked when the policy says ask.
func (s *Server) egressCheck(ctx context.Context, id string, req egress.Request) egress.Verdict {
	var gates []*approval.Gate
	for _, m := range s.fleet.Members(id) {
		if t, ok := m.(*thread); ok {
			gates = append(gates, t.gate)
		}
	}
	return approval.CheckEgress(ctx, gates, s.cfg.Policy, req)
}
