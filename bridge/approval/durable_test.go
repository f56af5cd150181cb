package approval_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// threadLog is one thread's log as every bridge sees it: what the gates of
// all "bridges" published, in order.
type threadLog struct {
	mu   sync.Mutex
	envs []wire.Envelope
}

func (l *threadLog) add(env wire.Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	env.Seq = uint64(len(l.envs) + 1)
	l.envs = append(l.envs, env)
}

func (l *threadLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.envs))
}

func (l *threadLog) logged(_ context.Context, after uint64, typ wire.Type, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, env := range l.envs {
		var ref struct {
			ApprovalID string `json:"approval_id"`
		}
		if env.Seq > after && env.Type == typ && env.Decode(&ref) == nil && ref.ApprovalID == id {
			return true
		}
	}
	return false
}

func (l *threadLog) count(typ wire.Type) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, env := range l.envs {
		if env.Type == typ {
			n++
		}
	}
	return n
}

// bridgeGate is thread t_1's gate on one of several bridges sharing st
// and log; its thread ends with ctx.
func bridgeGate(t *testing.T, st store.Approvals, log *threadLog, holder string, pol *policy.Policy, ctx context.Context) (*approval.Gate, *events) {
	ev := newEvents()
	g := approval.NewGate("t_1", pol, func(env wire.Envelope) { log.add(env); ev.publish(env) },
		approval.Config{Store: st, Holder: holder, Last: log.last, Logged: log.logged, Ctx: ctx})
	return g, ev
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var deleteCheck = wire.ToolCheck{Name: "delete_file", CallID: "c1", Arguments: json.RawMessage(`{"path":"x"}`)}

// askAndDie has bridge 1 ask about the check of sandbox sb1, and then end
// (its thread's context) before anyone answers: the waiter leaves with no
// decision. It returns the approval id.
func askAndDie(t *testing.T, st store.Approvals, log *threadLog, pol *policy.Policy) string {
	t.Helper()
	ctx1, die := context.WithCancel(context.Background())
	g1, ev1 := bridgeGate(t, st, log, "b1/one", pol, ctx1)
	left := make(chan bool, 1)
	go func() { _, decided := g1.CheckTool(ctx1, deleteCheck, "sb1/chk_1"); left <- decided }()
	var ar wire.ApprovalRequest
	if err := testutil.RequireReceive(t, "approval_request", ev1.ch, 5*time.Second).Decode(&ar); err != nil {
		t.Fatal(err)
	}
	die()
	if testutil.RequireReceive(t, "bridge 1's waiter leaving", left, 5*time.Second) {
		t.Fatal("bridge 1 decided the check as it died")
	}
	return ar.ApprovalID
}

// TestApprovalOutlivesItsBridge: an approval pending when its bridge ends
// is restored by the next bridge with its id and not asked again in the
// log; the agent's check asked again there joins it, and a client's
// answer there reaches it once.
func TestApprovalOutlivesItsBridge(t *testing.T) {
	t.Parallel()
	st, log, pol := openStore(t), &threadLog{}, askPolicy(t)
	id := askAndDie(t, st, log, pol)

	g2, ev2 := bridgeGate(t, st, log, "b2/two", pol, context.Background())
	g2.Restore(context.Background(), "sb1")
	verdict := make(chan wire.ToolVerdict, 2)
	go func() {
		v, _ := g2.CheckTool(context.Background(), deleteCheck, "sb1/chk_1") // the agent asks again
		verdict <- v
	}()
	approve := wire.MustNew(wire.TypeApprove, "t_1", "m1", wire.ApprovalAnswer{ApprovalID: id})
	if a, _ := g2.Answer(context.Background(), approve, "c5"); a.Refused != nil || a.Verdict != wire.VerdictApproved {
		t.Fatalf("approve on bridge 2: %+v", a)
	}
	if v := testutil.RequireReceive(t, "verdict", verdict, 5*time.Second); !v.Allowed {
		t.Fatalf("verdict %+v", v)
	}
	dec := testutil.RequireReceive(t, "approval_decision", ev2.ch, 5*time.Second)
	if dec.Type != wire.TypeApprovalDecision {
		t.Fatalf("bridge 2 published %s first", dec.Type)
	}
	if n := log.count(wire.TypeApprovalRequest); n != 1 {
		t.Errorf("%d approval_requests in the log, want 1", n)
	}
	if a, ok, err := st.Approval(context.Background(), id); err != nil || !ok || a.Decision == nil || a.Decision.By != "c5" {
		t.Errorf("stored approval %+v %v %v", a, ok, err)
	}
	// Asked again once more (a verdict lost with a connection): the same decision, nothing published.
	if v, decided := g2.CheckTool(context.Background(), deleteCheck, "sb1/chk_1"); !decided || !v.Allowed {
		t.Errorf("asked again after the decision: %+v %v", v, decided)
	}
	if n := log.count(wire.TypeApprovalDecision); n != 1 {
		t.Errorf("%d approval_decisions in the log, want 1", n)
	}
}

// TestRestorePublishesWhatTheLogLacks: a request its bridge stored but
// never logged is published by the bridge that restores it, once.
func TestRestorePublishesWhatTheLogLacks(t *testing.T) {
	t.Parallel()
	st, pol := openStore(t), askPolicy(t)
	id := askAndDie(t, st, &threadLog{}, pol) // a log that is lost with its bridge
	log := &threadLog{}
	g2, ev2 := bridgeGate(t, st, log, "b2/two", pol, context.Background())
	g2.Restore(context.Background(), "sb1")
	g2.Restore(context.Background(), "sb1") // a second restore adds nothing
	var ar wire.ApprovalRequest
	if err := testutil.RequireReceive(t, "approval_request", ev2.ch, 5*time.Second).Decode(&ar); err != nil || ar.ApprovalID != id {
		t.Fatalf("restored request %+v (%v), want %s", ar, err, id)
	}
	if n := log.count(wire.TypeApprovalRequest); n != 1 {
		t.Errorf("%d approval_requests published, want 1", n)
	}
}

// TestRestoreDeniesWhatCannotBeAnswered: the check of a sandbox that is
// not the thread's any more, and one whose expiry passed, are denied at
// restore; the decision is stored and published.
func TestRestoreDeniesWhatCannotBeAnswered(t *testing.T) {
	t.Parallel()
	short, err := policy.New(policy.File{Rules: []policy.Rule{{Tool: "delete_file", Action: policy.Ask}}, Timeout: policy.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sandbox string
		pol           *policy.Policy
		wait          time.Duration
		by            string
	}{
		{"other sandbox", "sb2", askPolicy(t), 0, wire.ByShutdown},
		{"expired", "sb1", short, 1100 * time.Millisecond, wire.ByTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, log := openStore(t), &threadLog{}
			id := askAndDie(t, st, log, tc.pol)
			time.Sleep(tc.wait) // the outage outlasts the approval
			g2, ev2 := bridgeGate(t, st, log, "b2/two", tc.pol, context.Background())
			g2.Restore(context.Background(), tc.sandbox)
			var d wire.ApprovalDecision
			if err := testutil.RequireReceive(t, "approval_decision", ev2.ch, 5*time.Second).Decode(&d); err != nil || d.ApprovalID != id || d.Verdict != wire.VerdictDenied || d.By != tc.by {
				t.Fatalf("decision %+v (%v)", d, err)
			}
			if a, _, _ := st.Approval(context.Background(), id); a.Decision == nil || a.Decision.By != tc.by {
				t.Errorf("stored %+v", a.Decision)
			}
		})
	}
}

// TestFirstAnswerOfAnyBridgeWins: bridge 1 still waits while a client of
// bridge 2 answers (bridge 2 takes the approval from the store); a later
// answer through bridge 1 is refused, and bridge 1's waiter gets bridge
// 2's decision.
func TestFirstAnswerOfAnyBridgeWins(t *testing.T) {
	t.Parallel()
	st, log, pol := openStore(t), &threadLog{}, askPolicy(t)
	g1, ev1 := bridgeGate(t, st, log, "b1/one", pol, context.Background())
	verdict := make(chan wire.ToolVerdict, 1)
	go func() {
		v, _ := g1.CheckTool(context.Background(), deleteCheck, "sb1/chk_1")
		verdict <- v
	}()
	var ar wire.ApprovalRequest
	_ = testutil.RequireReceive(t, "approval_request", ev1.ch, 5*time.Second).Decode(&ar)
	g2, _ := bridgeGate(t, st, log, "b2/two", pol, context.Background())
	deny := wire.MustNew(wire.TypeDeny, "t_1", "d", wire.ApprovalAnswer{ApprovalID: ar.ApprovalID, Reason: "through b2"})
	if a, _ := g2.Answer(context.Background(), deny, "c9"); a.Refused != nil {
		t.Fatalf("deny through bridge 2: %s", a.Refused.Data)
	}
	approve := wire.MustNew(wire.TypeApprove, "t_1", "a", wire.ApprovalAnswer{ApprovalID: ar.ApprovalID})
	if a, _ := g1.Answer(context.Background(), approve, "c1"); a.Refused == nil || !strings.Contains(string(a.Refused.Data), "not_found") {
		t.Fatalf("the later approve through bridge 1: %+v", a)
	}
	if v := testutil.RequireReceive(t, "verdict", verdict, 5*time.Second); v.Allowed || !strings.Contains(v.Reason, "through b2") {
		t.Fatalf("bridge 1's verdict %+v", v)
	}
}
