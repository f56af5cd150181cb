package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// failoverScript answers "run the lines" with a command that prints 150
// lines over some seconds, then a short text; anything else with "ok".
// Every bridge's model endpoint serves it: the turn's second model call
// goes to whichever bridge relays the thread then.
const failoverScript = `{"model":"scripted","turns":[
  {"when":"run the lines","steps":[
    {"tool_calls":[{"name":"execute","arguments":{"command":"for i in $(seq 1 150); do echo line $i; sleep 0.04; done","timeout":300}}]},
    {"content":"the lines are done"}]},
  {"steps":[{"content":"ok"}]}
]}`

// failoverTTL is the lease TTL of the fail-over test's bridges.
const failoverTTL = 2 * time.Second

// Fail-over (issue 22): three bridges on one PostgreSQL and one engine; a
// turn runs on bridge 0's thread, watched through all three (two of them
// forwarding to bridge 0), and bridge 0 is killed with SIGKILL while the
// turn's command streams. Another bridge takes the thread over after the
// lease expires — the same sandbox, whose command never stopped — bridge
// 0's client reconnects to a surviving bridge with the last seq it saw,
// the forwarded ones keep their connections, and each sees every seq
// from 1 to the turn's end exactly once, all 150 lines and one turn_done
// that stopped normally (its second model call went through the new
// relay). Then another turn runs.
func TestStorePostgresFailOver(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 3, failoverScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String())
	books := []*seqBook{newSeqBook(), newSeqBook(), newSeqBook()}
	ws := make([]*watcher, 3)
	ws[0] = envs[0].watch("", 0, books[0]) // made, and relayed, by bridge 0
	thread := ws[0].thread
	ws[1] = envs[1].watch(thread, 0, books[1])
	ws[2] = envs[2].watch(thread, 0, books[2])
	t.Cleanup(func() { // before the watchers close: which connection ended, and how
		if !t.Failed() {
			return
		}
		for k, w := range ws {
			select {
			case <-w.done:
				t.Logf("client %d's connection had ended: %v", k, w.err)
			default:
				t.Logf("client %d's connection was open", k)
			}
		}
	})
	sandbox := envs[0].containerOf(thread)
	id := ws[1].say(t, "please run the lines")
	books[0].await(t, "the command's output", turnTimeout, func(ev wire.Envelope) bool {
		return ev.Type == wire.TypeToolOutput && strings.Contains(outputOf(books[0].events(), id), "line 20")
	})
	killed := time.Now()
	if err := envs[0].bridge.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-envs[0].bridge.done
	t.Logf("bridge 0 killed after seq %d", books[0].last())

	// Bridge 0's own client finds its connection gone and reconnects to
	// bridge 1 with its last seq; the forwarded clients keep theirs (their
	// events come from the store, pgforward_test.go).
	<-ws[0].done
	ws[0] = envs[1].rewatch(thread, books[0], killed.Add(failoverTTL+time.Minute))
	t.Logf("client 0 back on bridge %s after seq %d, %s after the kill", envs[1].id, books[0].last(), time.Since(killed).Round(100*time.Millisecond))
	for k, b := range books {
		b.await(t, fmt.Sprintf("turn_done through client %d", k), turnTimeout, isType(wire.TypeTurnDone, id))
	}
	relay := ""
	for _, e := range envs[1:] {
		if strings.Contains(e.bridge.logText(), "took over a thread whose bridge is gone") {
			relay = e.id
		}
	}
	if relay == "" {
		t.Fatal("no bridge logged taking the thread over")
	}
	checkLinesTurn(t, books, id)
	if now := envs[0].containerOf(thread); now != sandbox {
		t.Errorf("the thread's sandbox is %s, was %s: it was replaced, not taken over", now, sandbox)
	}
	t.Logf("relayed by %s now; turn done %s after the kill", relay, time.Since(killed).Round(100*time.Millisecond))

	// The thread goes on: a turn through the bridge that does not relay it.
	other := envs[1]
	if other.id == relay {
		other = envs[2]
	}
	k := map[string]int{envs[1].id: 1, envs[2].id: 2}[other.id]
	id2 := ws[k].say(t, "and now?")
	books[k].await(t, "the next turn's turn_done", turnTimeout, isType(wire.TypeTurnDone, id2))
	books[k].check(t)
}

// rewatch dials thread after the newest seq in book until a bridge
// answers (the thread's relay may be gone and its lease not yet run out),
// at the latest until deadline, and records the events into book.
func (e *env) rewatch(thread string, book *seqBook, deadline time.Time) *watcher {
	e.t.Helper()
	w, err := e.redial(thread, book, deadline)
	if err != nil {
		e.t.Fatalf("reconnect to %s on bridge %s: %v\n%s", thread, e.id, err, e.bridge.logText())
	}
	e.t.Cleanup(w.close)
	return w
}

// redial is rewatch without failing the test: it returns the last
// dial's error at the deadline. The caller closes the watcher. It is
// safe to call from any goroutine.
func (e *env) redial(thread string, book *seqBook, deadline time.Time) (*watcher, error) {
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		ws, hello, err := chat.DialWebSocket(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread, AfterSeq: book.last()})
		cancel()
		if err == nil {
			w := &watcher{thread: hello.Thread, ws: ws, book: book, done: make(chan struct{})}
			go w.read()
			return w, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond) // a retry pace, not a wait for a condition
	}
	return nil, last
}

// approvalScript answers "tool rule" with a command the policy asks
// about, then "done".
const approvalScript = `{"model":"scripted","turns":[
  {"when":"tool rule","steps":[
    {"tool_calls":[{"name":"execute","arguments":{"command":"echo would git push origin main"}}]},
    {"content":"done"}]},
  {"steps":[{"content":"ok"}]}
]}`

// An approval asked on one bridge is answered through another (issue 22
// item 4): bridge 0 relays the thread and its gate asks; a client of
// bridge 1, forwarded to bridge 0, gets the approval_request and approves,
// the command runs once, and bridge 0's own client sees the same request
// and the decision by the other bridge's client.
func TestStorePostgresApprovalThroughAnotherBridge(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, approvalScript, "BOXWIRE_STORE="+url, askPolicyFile(t))
	book := newSeqBook()
	w := envs[0].watch("", 0, book) // made, and relayed, by bridge 0
	s := envs[1].dial(w.thread)     // forwarded to bridge 0
	asked := 0
	events := s.turnAnswering("tool rule", func(req wire.ApprovalRequest) wire.Type {
		asked++
		if req.Kind != wire.ApprovalTool || req.Tool != "execute" {
			t.Errorf("approval request %+v: want the execute call", req)
		}
		return wire.TypeApprove
	})
	if asked != 1 {
		t.Fatalf("asked %d times through bridge 1, want 1", asked)
	}
	if out := toolText(t, events); !strings.Contains(out, "would git push origin main") {
		t.Fatalf("the approved command's output is missing:\n%s", out)
	}
	book.await(t, "turn_done on bridge 0's client", turnTimeout, isType(wire.TypeTurnDone, ""))
	reqs, decs := ofType[wire.ApprovalRequest](t, book.events(), wire.TypeApprovalRequest), ofType[wire.ApprovalDecision](t, book.events(), wire.TypeApprovalDecision)
	if len(reqs) != 1 || len(decs) != 1 || decs[0].Verdict != wire.VerdictApproved || decs[0].ApprovalID != reqs[0].ApprovalID {
		t.Fatalf("bridge 0's client saw requests %+v and decisions %+v; want the one, approved", reqs, decs)
	}
	book.check(t)
}

// PostgreSQL restarted mid-turn on three bridges (issue 22 tests): each
// bridge relays a thread whose command streams, watched through all
// three; the database goes down for longer than the lease TTL, so every
// lease runs out. Every bridge reports 503 meanwhile and 200 after; each
// takes its own threads' leases back — none takes over another's (a
// bridge waits a TTL after the store returns before it takes over
// anything) — and every watcher sees each seq to the command's end
// exactly once and all its output.
func TestStorePostgresDownMidTurnThreeBridges(t *testing.T) {
	pg, url := postgres(t)
	envs := startBridges(t, 3, failoverScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String())
	type flow struct {
		id    string
		books []*seqBook
	}
	var flows []flow
	for i, relay := range envs {
		books := []*seqBook{newSeqBook(), newSeqBook(), newSeqBook()}
		w := relay.watch("", 0, books[0])
		driver := envs[(i+1)%3].watch(w.thread, 0, books[1])
		envs[(i+2)%3].watch(w.thread, 0, books[2])
		flows = append(flows, flow{driver.run(t, "execute", linesCmd(250, "0.03")), books})
	}
	for _, f := range flows {
		f.books[0].await(t, "the command's output", turnTimeout, func(ev wire.Envelope) bool {
			return strings.Contains(outputOf(f.books[0].events(), f.id), "line 10")
		})
	}
	ls, err := openPG(t, url).Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var expiry time.Time
	for _, l := range ls {
		expiry = maxTime(expiry, l.Expires)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pg.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		waitFor(t, "readyz 503 while PostgreSQL is down", func() bool { code, _ := ready(t, e); return code == 503 })
	}
	waitFor(t, "every lease ran out", func() bool { return time.Now().After(expiry.Add(time.Second)) })
	if err := pg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		waitFor(t, "readyz 200 once PostgreSQL is back", func() bool { code, _ := ready(t, e); return code == 200 })
	}
	for i, f := range flows {
		for k, b := range f.books {
			b.await(t, fmt.Sprintf("tool_result of flow %d through bridge %d", i, k), turnTimeout, isType(wire.TypeToolResult, f.id))
			b.check(t)
			countLines(t, outputOf(b.events(), f.id), 250)
		}
	}
	for _, e := range envs {
		if log := e.bridge.logText(); strings.Contains(log, "took over a thread") || strings.Contains(log, "stopped relaying the thread") {
			t.Errorf("bridge %s moved threads after the outage:\n%s", e.id, log)
		}
		if n := len(e.containers(nil)); n != 1 {
			t.Errorf("bridge %s runs %d sandboxes, want its own thread's", e.id, n)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
