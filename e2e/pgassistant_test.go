package e2e_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// assistantScript is failoverScript with a color to remember and a
// question about it, for the thread that shares the sandbox.
const assistantScript = `{"model":"scripted","turns":[
  {"when":"run the lines","steps":[
    {"tool_calls":[{"name":"execute","arguments":{"command":"for i in $(seq 1 150); do echo line $i; sleep 0.04; done","timeout":300}}]},
    {"content":"the lines are done"}]},
  {"when":"my color is","steps":[{"content":"Noted: the color is blue."}]},
  {"when":"which color","steps":[{"content":"It was blue."}]},
  {"steps":[{"content":"ok"}]}
]}`

// Fail-over of an assistant's shared sandbox (issue 22): bridge 0 makes
// two threads of one assistant, which share a sandbox; thread a streams a
// command, thread b has had a turn and is watched through bridge 2 too
// (forwarded). Bridge 0 is killed with SIGKILL mid-command; a's client
// reconnects to bridge 1 and b's to bridge 2, so the two threads are asked
// of different bridges at once. One bridge takes the whole sandbox over —
// both threads' leases, the same container, no new one — and the other
// forwards to it; every client sees every seq once, a's 150 lines and one
// turn_done, no sandbox_replaced; b's next turn is answered from its own
// conversation, which the agent kept, and not a's. Before, each thread was
// resumed in a new sandbox on the box's name, which the running one holds
// (the engine's name conflict), until the test gave up.
func TestStorePostgresAssistantFailOver(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 3, assistantScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String())
	shared := map[string]string{"boxwire.assistant": "helper-f"}
	a := envs[0].createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-f"})
	b := envs[0].createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-f"})
	boxes := envs[0].containers(shared)
	if len(boxes) != 1 || a.SandboxID != b.SandboxID {
		t.Fatalf("the assistant's threads run in %d sandboxes (%s, %s), want one shared", len(boxes), a.SandboxID, b.SandboxID)
	}
	books := map[string]*seqBook{"a": newSeqBook(), "b": newSeqBook(), "b via bridge 2": newSeqBook()}
	wa := envs[0].watch(a.ID, 0, books["a"])
	wb := envs[0].watch(b.ID, 0, books["b"])
	envs[2].watch(b.ID, 0, books["b via bridge 2"]) // forwarded to bridge 0; keeps its connection
	color := wb.say(t, "my color is blue")
	books["b"].await(t, "b's first turn_done", turnTimeout, isType(wire.TypeTurnDone, color))
	lines := wa.say(t, "please run the lines")
	books["a"].await(t, "a's command output", turnTimeout, func(ev wire.Envelope) bool {
		return ev.Type == wire.TypeToolOutput && strings.Contains(outputOf(books["a"].events(), lines), "line 20")
	})
	killed := time.Now()
	if err := envs[0].bridge.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-envs[0].bridge.done
	<-wa.done
	<-wb.done

	back := rewatchAtOnce(t, killed.Add(failoverTTL+time.Minute), []*env{envs[1], envs[2]},
		[]string{a.ID, b.ID}, []*seqBook{books["a"], books["b"]})
	wa, wb = back[0], back[1]
	t.Logf("both clients back %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	books["a"].await(t, "a's turn_done", turnTimeout, isType(wire.TypeTurnDone, lines))
	checkLinesTurn(t, []*seqBook{books["a"]}, lines)

	relay := sharedRelay(t, url, a.ID, b.ID)
	t.Logf("bridge %s relays both threads; a's turn done %s after the kill", relay, time.Since(killed).Round(100*time.Millisecond))
	if now := envs[0].containers(shared); len(now) != 1 || now[0].ID != boxes[0].ID || !now[0].Running {
		t.Errorf("the assistant's sandboxes are %+v; want %s, still running: taken over, not replaced", now, boxes[0].ID)
	}
	for _, e := range envs[1:] {
		if n := len(e.containers(nil)); n != 0 {
			t.Errorf("bridge %s made %d sandboxes; want none", e.id, n)
		}
		if e.id == relay && strings.Count(e.bridge.logText(), "took over a thread whose bridge is gone") != 2 {
			t.Errorf("the relay %s did not log taking both threads over:\n%s", e.id, e.bridge.logText())
		}
		if e.id != relay {
			t.Logf("bridge %s found the shared sandbox relayed by the other %d times", e.id, strings.Count(e.bridge.logText(), "a thread of the shared sandbox is relayed by another bridge"))
		}
	}

	// Both threads go on, each with its own conversation.
	which := wb.say(t, "which color did I tell you?")
	books["b"].await(t, "b's next turn_done", turnTimeout, isType(wire.TypeTurnDone, which))
	books["b via bridge 2"].await(t, "b's next turn_done through bridge 2's first client", turnTimeout, isType(wire.TypeTurnDone, which))
	relayEnv := envs[1]
	if relay == envs[2].id {
		relayEnv = envs[2]
	}
	if ok, msgs := relayEnv.lastChatHas([]string{"my color is blue"}, []string{"please run the lines"}); !ok {
		t.Errorf("thread b's model request after the takeover: %s", msgs)
	}
	again := wa.say(t, "and now?")
	books["a"].await(t, "a's next turn_done", turnTimeout, isType(wire.TypeTurnDone, again))

	// Bridge 0 starts again on its data folder: the sandbox it made, which
	// the relay runs now, is left to the relay — not adopted, its sockets
	// not served again — so b's next model call still goes through the
	// relay's proxy (the agent holds the relay's token).
	envs[0].startBridge("BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String()) // serves once it reconciled
	after := wb.say(t, "and after the restart?")
	var done wire.TurnDone
	mustDecode(t, books["b"].await(t, "b's turn_done after bridge 0's restart", turnTimeout, isType(wire.TypeTurnDone, after)), &done)
	if done.Reason != wire.ReasonStop {
		t.Errorf("b's turn after bridge 0's restart ended %+v; want stop (its model call through the relay's proxy)", done)
	}
	if log := envs[0].bridge.logText(); !strings.Contains(log, "sandbox relayed by another bridge: left to it") {
		t.Errorf("bridge 0 did not leave the shared sandbox to its relay:\n%s", log)
	}
	if relay != sharedRelay(t, url, a.ID, b.ID) {
		t.Errorf("the threads moved after bridge 0's restart")
	}
	for name, book := range books {
		book.check(t)
		if ev, found := find(book.events(), isType(wire.TypeSandboxReplaced, "")); found {
			t.Errorf("client of %s saw sandbox_replaced: %s", name, ev.Data)
		}
	}
}

// rewatchAtOnce reconnects threads[i] after the newest seq in books[i]
// through envs[i], all at the same moment (each as rewatch does), so that
// the bridges are asked for the threads of one sandbox at once.
func rewatchAtOnce(t *testing.T, deadline time.Time, envs []*env, threads []string, books []*seqBook) []*watcher {
	t.Helper()
	ws, errs := make([]*watcher, len(envs)), make([]error, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = e.redial(threads[i], books[i], deadline)
		}()
	}
	wg.Wait()
	for i, w := range ws {
		if w != nil {
			t.Cleanup(w.close)
		}
		if errs[i] != nil {
			t.Fatalf("reconnect to %s on bridge %s: %v\n%s", threads[i], envs[i].id, errs[i], envs[i].bridge.logText())
		}
	}
	return ws
}

// sharedRelay returns the bridge that holds the leases of threads, and
// fails t unless one bridge holds them all.
func sharedRelay(t *testing.T, url string, threads ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	ls, err := openPG(t, url).Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, l := range ls {
		holders[l.Thread] = l.Holder
	}
	relay := holders[threads[0]]
	for _, th := range threads {
		if holders[th] == "" || holders[th] != relay {
			t.Fatalf("the shared sandbox's threads are relayed by %v; want one bridge", holders)
		}
	}
	return relay
}

// A suspended thread of an assistant is resumed through a bridge other
// than the one that runs its box's sandbox again (issue 22): bridge 0
// makes threads a, b and d of one assistant, all three are suspended
// (idle) and bridge 0 gives their leases up; a resumes on bridge 0, whose
// new sandbox takes the box's name back. b's client on bridge 1 is
// forwarded to bridge 0, where b joins the running sandbox with its
// history, and a new thread of the assistant made on bridge 1 does not
// take the box's workspace back (d is suspended in it, but the box is in
// use) and gets a sandbox of its own: one bridge relays the box's
// threads, no second sandbox of the box, no volume left behind, and b's
// next model call carries its own conversation. Before, bridge 1 made
// the sandbox boxwire-<box> for each and failed on the engine's name
// conflict.
func TestStorePostgresAssistantResumedElsewhere(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, assistantScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String(),
		"BOXWIRE_IDLE_TTL=3s", "BOXWIRE_REAP_INTERVAL=200ms")
	shared := map[string]string{"boxwire.assistant": "helper-r"}
	var threads []wire.ThreadInfo
	for range 3 {
		threads = append(threads, envs[0].createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-r"}))
	}
	a, b := threads[0], threads[1]
	bookB := newSeqBook()
	wb := envs[0].watch(b.ID, 0, bookB)
	color := wb.say(t, "my color is blue")
	bookB.await(t, "b's first turn_done", turnTimeout, isType(wire.TypeTurnDone, color))
	wb.close()
	db := openPG(t, url)
	waitFor(t, "the threads suspended and their leases given up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		defer cancel()
		ls, err := db.Leases(ctx)
		if err != nil || len(envs[0].containers(shared)) != 0 || slices.ContainsFunc(ls, func(l store.Lease) bool {
			return l.Expires.After(time.Now()) && slices.ContainsFunc(threads, func(th wire.ThreadInfo) bool { return th.ID == l.Thread })
		}) {
			return false
		}
		for _, th := range threads {
			if envs[0].threadInfo(th.ID).Status != wire.SandboxSuspended {
				return false
			}
		}
		return true
	})

	bookA := newSeqBook()
	envs[0].watch(a.ID, 0, bookA) // stays attached: the sandbox is not suspended again
	bookA.await(t, "a resumed", turnTimeout, isType(wire.TypeSandboxReplaced, ""))
	boxes := envs[0].containers(shared)
	if len(boxes) != 1 || !boxes[0].Running {
		t.Fatalf("the assistant's sandboxes on bridge 0 after a's resume: %+v; want one running", boxes)
	}
	box := boxes[0].Labels["boxwire.box"]

	if wb, err := envs[1].redial(b.ID, bookB, time.Now().Add(turnTimeout)); err != nil { // forwarded to bridge 0
		t.Errorf("resume b through bridge 1: %v", err)
	} else {
		t.Cleanup(wb.close)
		var rep wire.SandboxReplaced
		mustDecode(t, bookB.await(t, "b resumed", turnTimeout, isType(wire.TypeSandboxReplaced, "")), &rep)
		if rep.SandboxID != boxes[0].ID || rep.Restored == 0 {
			t.Errorf("b resumed %+v; want in %s (bridge 0's sandbox of the box), its history restored", rep, boxes[0].ID)
		}
		which := wb.say(t, "which color did I tell you?")
		bookB.await(t, "b's next turn_done", turnTimeout, isType(wire.TypeTurnDone, which))
		if ok, msgs := envs[0].lastChatHas([]string{"my color is blue"}, nil); !ok {
			t.Errorf("b's model request after the resume: %s", msgs)
		}
		if relay := sharedRelay(t, url, a.ID, b.ID); relay != envs[0].id {
			t.Errorf("the box's threads are relayed by %s; want bridge 0 (%s), which runs its sandbox", relay, envs[0].id)
		}
		bookB.check(t)
	}

	c := envs[1].createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-r"})
	envs[1].watch(c.ID, 0, newSeqBook()) // stays attached
	mine := envs[1].containers(shared)
	if len(mine) != 1 || mine[0].ID != c.SandboxID || mine[0].Labels["boxwire.box"] == box {
		t.Fatalf("the new thread's sandboxes on bridge 1: %+v; want its own (not box %s, which bridge 0 runs)", mine, box)
	}
	if now := envs[0].containers(shared); len(now) != 1 || now[0].ID != boxes[0].ID {
		t.Errorf("the assistant's sandboxes on bridge 0 at the end: %+v; want only %s", now, boxes[0].ID)
	}
	if vols := envs[0].volumes(); len(vols) != 1 || vols[0] != "boxwire-ws-"+box {
		t.Errorf("bridge 0's volumes %v; want only boxwire-ws-%s", vols, box)
	}
	if vols := envs[1].volumes(); len(vols) != 1 || vols[0] != "boxwire-ws-"+mine[0].Labels["boxwire.box"] {
		t.Errorf("bridge 1's volumes %v; want only the new thread's", vols)
	}
	for _, e := range envs {
		if log := e.bridge.logText(); strings.Contains(log, "is already in use") {
			t.Errorf("bridge %s met the engine's name conflict:\n%s", e.id, log)
		}
	}
}
