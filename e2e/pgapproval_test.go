package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// A pending approval survives its relay's death (issue 22): the approval
// is in the store, the agent keeps the call waiting across its bridge
// connection's end and asks again on the next one, and the bridge that
// relays the thread next restores the approval with its id. The client's
// book sees one approval_request and one approval_decision, and the
// command runs at most once.

// askPolicyFile writes a policy that asks about "git push" commands and
// returns the environment that gives it to a bridge.
func askPolicyFile(t *testing.T) string {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"rules": [{"tool": "execute", "args": {"command": "*git push*"}, "action": "ask"}],
  "approval_timeout": "2m"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return "BOXWIRE_POLICY=" + pol
}

// startBridges starts n bridges, each with its own model endpoint serving
// script and data folder, one credential for all, on extraEnv (a shared
// store).
func startBridges(t *testing.T, n int, script string, extraEnv ...string) []*env {
	t.Helper()
	envs := make([]*env, n)
	for i := range envs {
		envs[i] = newEnv(t, script)
		if i > 0 {
			envs[i].token = envs[0].token // one credential for every bridge
		}
		envs[i].startBridge(extraEnv...)
		envs[i].cleanAtEnd()
	}
	return envs
}

// answer sends approve or deny for approval id on w.
func (w *watcher) answer(t *testing.T, typ wire.Type, id string) {
	t.Helper()
	data, err := wire.Marshal(wire.MustNew(typ, w.thread, "ans-"+randHex(4), wire.ApprovalAnswer{ApprovalID: id, Reason: "e2e says so"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = w.ws.SetWriteDeadline(time.Now().Add(eventTimeout))
	if err := w.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		t.Fatalf("send %s: %v", typ, err)
	}
}

// awaitApproval waits for turn id's approval_request in book.
func awaitApproval(t *testing.T, book *seqBook) wire.ApprovalRequest {
	t.Helper()
	var req wire.ApprovalRequest
	mustDecode(t, book.await(t, "the approval_request", turnTimeout, isType(wire.TypeApprovalRequest, "")), &req)
	return req
}

// checkApprovalOnce checks that book holds one approval_request and one
// approval_decision, for req, with the verdict want, decided by a client
// (not a timeout or a shutdown); the turn id ended once and normally;
// and the command ran once when approved, never when denied.
func checkApprovalOnce(t *testing.T, book *seqBook, req wire.ApprovalRequest, id, want string) {
	t.Helper()
	book.await(t, "turn_done", turnTimeout, isType(wire.TypeTurnDone, id))
	book.check(t)
	evs := book.events()
	reqs := ofType[wire.ApprovalRequest](t, evs, wire.TypeApprovalRequest)
	decs := ofType[wire.ApprovalDecision](t, evs, wire.TypeApprovalDecision)
	if len(reqs) != 1 || reqs[0].ApprovalID != req.ApprovalID {
		t.Errorf("approval requests %+v; want the one, %s", reqs, req.ApprovalID)
	}
	if len(decs) != 1 || decs[0].ApprovalID != req.ApprovalID || decs[0].Verdict != want || !strings.HasPrefix(decs[0].By, "c") {
		t.Errorf("approval decisions %+v; want one %s by a client", decs, want)
	}
	results := ofType[wire.ToolResult](t, turnEvents(book, id), wire.TypeToolResult)
	ran := 0
	for _, r := range results {
		if strings.Contains(r.Output, "would git push origin main") {
			ran++
		}
	}
	switch {
	case len(results) != 1:
		t.Errorf("%d tool_results, want 1: %+v", len(results), results)
	case want == wire.VerdictApproved && ran != 1:
		t.Errorf("the approved command ran %d times: %+v", ran, results)
	case want == wire.VerdictDenied && (ran != 0 || !strings.Contains(results[0].Error, "denied by")):
		t.Errorf("the denied command's result %+v", results[0])
	}
	if ds := turnDones(book, id); len(ds) != 1 || ds[0].Reason != wire.ReasonStop {
		t.Errorf("turn_done %+v; want one that stopped", ds)
	}
}

// Three bridges on PostgreSQL (lease TTL 2 s): a thread's approval is asked
// on its relay, which is killed with SIGKILL; the client reconnects to
// another bridge with its last seq and answers there; the call waiting in
// the same sandbox gets the answer once. First approved on bridge 0's
// thread, then denied on bridge 1's.
func TestStorePostgresApprovalSurvivesFailOver(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 3, approvalScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String(), askPolicyFile(t))
	for _, tc := range []struct {
		relay, answerer int
		verdict         string
		answer          wire.Type
	}{
		{0, 1, wire.VerdictApproved, wire.TypeApprove},
		{1, 2, wire.VerdictDenied, wire.TypeDeny},
	} {
		book := newSeqBook()
		w := envs[tc.relay].watch("", 0, book) // made, and relayed, by this bridge
		sandbox := envs[tc.relay].containerOf(w.thread)
		id := w.say(t, "tool rule")
		req := awaitApproval(t, book)
		killed := time.Now()
		if err := envs[tc.relay].bridge.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-envs[tc.relay].bridge.done
		<-w.done
		w = envs[tc.answerer].rewatch(w.thread, book, killed.Add(failoverTTL+time.Minute))
		w.answer(t, tc.answer, req.ApprovalID)
		checkApprovalOnce(t, book, req, id, tc.verdict)
		if now := envs[tc.relay].containerOf(w.thread); now != sandbox { // labelled with the bridge that made it
			t.Errorf("the thread's sandbox is %s, was %s: the waiting call's agent is gone", now, sandbox)
		}
		t.Logf("%s through bridge %d, turn done %s after bridge %d's kill", tc.verdict, tc.answerer,
			time.Since(killed).Round(100*time.Millisecond), tc.relay)
	}
}

// One bridge on its bbolt file is killed (SIGKILL) while an approval
// waits and started again on the same data folder: it adopts the running
// sandbox, restores the approval, and the client that reconnects answers
// it; the call runs once.
func TestApprovalSurvivesBridgeRestart(t *testing.T) {
	e := newEnv(t, approvalScript)
	pol := askPolicyFile(t)
	b := e.startBridge(pol)
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	id := w.say(t, "tool rule")
	req := awaitApproval(t, book)
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.done
	<-w.done
	e.startBridge(pol)
	w = e.rewatch(w.thread, book, time.Now().Add(time.Minute))
	w.answer(t, wire.TypeApprove, req.ApprovalID)
	checkApprovalOnce(t, book, req, id, wire.VerdictApproved)
}
