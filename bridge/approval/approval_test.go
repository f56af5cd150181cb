package approval_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// events collects what a gate publishes.
type events struct {
	mu   sync.Mutex
	envs []wire.Envelope
	ch   chan wire.Envelope
}

func newEvents() *events { return &events{ch: make(chan wire.Envelope, 16)} }

func (e *events) publish(env wire.Envelope) {
	e.mu.Lock()
	e.envs = append(e.envs, env)
	e.mu.Unlock()
	e.ch <- env
}

func askPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.New(policy.File{Rules: []policy.Rule{{Tool: "delete_file", Action: policy.Ask}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAnswerDecidesOnce: a tool_check the policy asks about waits for a
// client's approve; the first answer wins, a second (and one naming no
// request) is refused with not_found, and the verdict reaches the agent.
func TestAnswerDecidesOnce(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	g := approval.NewGate("t_1", askPolicy(t), ev.publish)
	verdict := make(chan wire.ToolVerdict, 1)
	go func() {
		v, _ := g.CheckTool(context.Background(), wire.ToolCheck{Name: "delete_file", CallID: "c1", Arguments: json.RawMessage(`{"path":"x"}`)}, "")
		verdict <- v
	}()
	req := testutil.RequireReceive(t, "approval_request", ev.ch, 5*time.Second)
	var ar wire.ApprovalRequest
	if req.Type != wire.TypeApprovalRequest || req.Decode(&ar) != nil || ar.ApprovalID == "" || req.Thread != "t_1" {
		t.Fatalf("first event: %+v", req)
	}
	approve := wire.MustNew(wire.TypeApprove, "t_1", "m1", wire.ApprovalAnswer{ApprovalID: ar.ApprovalID})
	if a, ok := g.Answer(context.Background(), approve, "c7"); !ok || a.Refused != nil || a.Verdict != wire.VerdictApproved || a.ApprovalID != ar.ApprovalID {
		t.Fatalf("approve: %+v %v", a, ok)
	}
	if v := testutil.RequireReceive(t, "verdict", verdict, 5*time.Second); !v.Allowed {
		t.Fatalf("verdict: %+v", v)
	}
	dec := testutil.RequireReceive(t, "approval_decision", ev.ch, 5*time.Second)
	var d wire.ApprovalDecision
	if dec.Type != wire.TypeApprovalDecision || dec.Decode(&d) != nil || d.By != "c7" || d.Verdict != wire.VerdictApproved {
		t.Fatalf("decision: %+v", dec)
	}
	deny := wire.MustNew(wire.TypeDeny, "t_1", "m2", wire.ApprovalAnswer{ApprovalID: ar.ApprovalID})
	if a, ok := g.Answer(context.Background(), deny, "c8"); !ok || a.Refused == nil || !strings.Contains(string(a.Refused.Data), "not_found") {
		t.Fatalf("second answer: %+v %v", a, ok)
	}
}

// TestAnswerRefusals: approval messages a client may not send, or sends
// without an id, are refused; other types are not the gate's.
func TestAnswerRefusals(t *testing.T) {
	t.Parallel()
	g := approval.NewGate("t_1", nil, func(wire.Envelope) {})
	for _, env := range []wire.Envelope{
		wire.MustNew(wire.TypeToolCheck, "t_1", "a", wire.ToolCheck{Name: "x"}),
		wire.MustNew(wire.TypeToolVerdict, "t_1", "b", wire.ToolVerdict{Allowed: true}),
		wire.MustNew(wire.TypeApprove, "t_1", "c", wire.ApprovalAnswer{}),
	} {
		a, ok := g.Answer(context.Background(), env, "c1")
		if !ok || a.Refused == nil || a.Refused.ID != env.ID || !strings.Contains(string(a.Refused.Data), "bad_message") {
			t.Errorf("%s: %+v %v", env.Type, a, ok)
		}
	}
	if _, ok := g.Answer(context.Background(), wire.MustNew(wire.TypeUserMessage, "t_1", "d", wire.UserMessage{Text: "hi"}), "c1"); ok {
		t.Error("user_message taken by the gate")
	}
}

// TestCheckToolWaiterLeaves: a check whose waiter leaves (its agent
// connection ended) is not decided; an answer afterwards decides it, and
// the same check asked again gets that decision without a second request.
func TestCheckToolWaiterLeaves(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	g := approval.NewGate("t_1", askPolicy(t), ev.publish)
	chk := wire.ToolCheck{Name: "delete_file", CallID: "c1", Arguments: json.RawMessage(`{}`)}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan bool, 1)
	go func() { _, decided := g.CheckTool(ctx, chk, "sb/chk_1"); left <- decided }()
	req := testutil.RequireReceive(t, "approval_request", ev.ch, 5*time.Second)
	cancel()
	if decided := testutil.RequireReceive(t, "the waiter leaving", left, 5*time.Second); decided {
		t.Fatal("a check whose waiter left was decided")
	}
	var ar wire.ApprovalRequest
	_ = req.Decode(&ar)
	deny := wire.MustNew(wire.TypeDeny, "t_1", "m1", wire.ApprovalAnswer{ApprovalID: ar.ApprovalID, Reason: "no"})
	if a, _ := g.Answer(context.Background(), deny, "c3"); a.Refused != nil {
		t.Fatalf("deny after the waiter left: %s", a.Refused.Data)
	}
	testutil.RequireReceive(t, "approval_decision", ev.ch, 5*time.Second)
	v, decided := g.CheckTool(context.Background(), chk, "sb/chk_1")
	if !decided || v.Allowed || !strings.Contains(v.Reason, "denied by c3: no") {
		t.Fatalf("asked again: %+v %v", v, decided)
	}
	select {
	case env := <-ev.ch:
		t.Fatalf("asking again published %s", env.Type)
	default:
	}
}

// TestStreamHoldsASplitSecret: a key split over two tool_output chunks is
// masked whole; the held tail survives a snapshot and restore.
func TestStreamHoldsASplitSecret(t *testing.T) {
	t.Parallel()
	const keyA, keyB = "sk-abcdefghijkl", "mnopqrstuvwx"
	out := func(s string) wire.Envelope {
		return wire.MustNew(wire.TypeToolOutput, "t_1", "", wire.ToolOutput{CallID: "c1", Output: s})
	}
	var sent strings.Builder
	text := func(env wire.Envelope) {
		var o wire.ToolOutput
		if err := env.Decode(&o); err != nil {
			t.Fatal(err)
		}
		sent.WriteString(o.Output)
	}
	g := approval.NewGate("t_1", nil, func(wire.Envelope) {})
	if _, env, keep := g.Stream(out("key: " + keyA)); keep {
		text(env)
	}
	// A bridge restart in the middle: the tail comes back from the cursor.
	g2 := approval.NewGate("t_1", nil, func(wire.Envelope) {})
	g2.RestoreHeld(g.HeldSnapshot())
	if _, env, keep := g2.Stream(out(keyB + " done")); keep {
		text(env)
	}
	before, _, _ := g2.Stream(wire.MustNew(wire.TypeToolResult, "t_1", "", wire.ToolResult{CallID: "c1"}))
	for _, b := range before {
		text(b)
	}
	if got := sent.String(); strings.Contains(got, "abcdef") || strings.Contains(got, "mnop") || !strings.Contains(got, policy.Mask) {
		t.Fatalf("sent %q", got)
	}
	if g2.HeldSnapshot() != nil {
		t.Fatal("a tail is still held after the result")
	}
}

// TestStreamMasksConfigSecrets: the values Config.Secrets returns (the
// sandbox's rotating LLM tokens) are masked in tool output and results,
// asked again at each event, so a rotated token is masked too.
func TestStreamMasksConfigSecrets(t *testing.T) {
	t.Parallel()
	tokens := []string{"tok0-0123456789abcdef"}
	g := approval.NewGate("t_1", nil, func(wire.Envelope) {}, approval.Config{Secrets: func() []string { return tokens }})
	text := func(env wire.Envelope) string {
		_, out, _ := g.Stream(env)
		return string(out.Data)
	}
	if got := text(wire.MustNew(wire.TypeToolOutput, "t_1", "", wire.ToolOutput{CallID: "c1", Output: "a tok0-0123456789abcdef b\n"})); strings.Contains(got, "tok0") || !strings.Contains(got, policy.Mask) {
		t.Errorf("tool_output %s", got)
	}
	tokens = append(tokens, "tok1-fedcba9876543210")
	if got := text(wire.MustNew(wire.TypeToolResult, "t_1", "", wire.ToolResult{CallID: "c1", Output: "tok1-fedcba9876543210 tok0-0123456789abcdef"})); strings.Contains(got, "tok1") || strings.Contains(got, "tok0") {
		t.Errorf("tool_result %s", got)
	}
}
