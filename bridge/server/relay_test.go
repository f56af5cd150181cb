package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

func TestAgentDeath(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	a.turn("m1", "hi")
	b.readTurn()
	e.mgr.Kill("sb1", 137, true)
	for _, s := range []*session{a, b} {
		ev := s.read()
		var exit wire.SandboxExited
		if ev.Type != wire.TypeSandboxExited || ev.Seq != 5 || ev.Decode(&exit) != nil || exit.Reason != wire.ExitOOM || *exit.ExitCode != 137 {
			t.Fatalf("got %s seq %d %s", ev.Type, ev.Seq, ev.Data)
		}
		ev = s.read()
		var rep wire.SandboxReplaced
		if ev.Type != wire.TypeSandboxReplaced || ev.Seq != 6 || ev.Decode(&rep) != nil || rep.Reason != wire.ExitOOM || rep.Restored != 3 {
			t.Fatalf("got %s seq %d %s", ev.Type, ev.Seq, ev.Data)
		}
	}
	// The replacement answers, and the events stay in the log for clients
	// that come later.
	a.request(wire.TypePing, "p", nil)
	if ev := a.read(); ev.Type != wire.TypePong {
		t.Fatalf("after replacement: got %s %s", ev.Type, ev.Data)
	}
	c, _ := e.attach(id, 4)
	if ev := c.read(); ev.Type != wire.TypeSandboxExited {
		t.Fatalf("replay: got %s", ev.Type)
	}
	if ev := c.read(); ev.Type != wire.TypeSandboxReplaced {
		t.Fatalf("replay: got %s", ev.Type)
	}
	// The operator learns why: the start of the dead agent's crash report
	// (not only the end of its stack) is in the bridge's log.
	if logs := e.logs.String(); !strings.Contains(logs, "fatal error: fake agent exiting with code 137") {
		t.Fatalf("the bridge log lacks the dead agent's log tail:\n%s", logs)
	}
}

// A client that does not read only falls behind: it is never sent events
// twice or with gaps, and the fast client is not slowed.
func TestSlowClientCatchesUp(t *testing.T) {
	e := newEnv(t)
	fast, id := e.attach("", 0)
	slow := e.openSmallBuffer(id) // never reads until the flood is over
	fast.request(wire.TypeUserMessage, "f", wire.UserMessage{Text: "flood 600"})
	events := fast.readTurn()
	if len(events) != 602 || events[601].Seq != 602 {
		t.Fatalf("fast client got %d events", len(events))
	}
	got := slow.readTurn()
	for i, ev := range got {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("slow client: event %d has seq %d", i, ev.Seq)
		}
	}
	if len(got) != 602 {
		t.Fatalf("slow client got %d events", len(got))
	}
	// A client that reconnects catches up from the log.
	again, _ := e.attach(id, 600)
	if s := summary(again.readTurn()); s != "601:assistant_delta:f 602:turn_done:f" {
		t.Fatalf("catch up %s", s)
	}
}

// A client that does not read its replies never holds up the agent's
// replies to another client: the agent link's reader writes a reply on
// its own goroutine only as far as the client's socket takes it at once
// (wire.TryConn), and leaves the rest to the slow client's writer. The
// slow client then gets every byte of its replies, in order.
func TestSlowClientRepliesDoNotHoldUpOthers(t *testing.T) {
	e := newEnv(t)
	fast, id := e.attach("", 0)
	slow := e.openSmallBuffer(id) // does not read until the end
	const pings = 160             // 160 × 64 KiB: more than the sockets between hold
	blob := strings.Repeat("y", 64<<10)
	for i := range pings {
		slow.request(wire.TypePing, fmt.Sprintf("s%d", i), wire.Text{Text: fmt.Sprintf("%d:%s", i, blob)})
	}
	// The fake agent answers in order: once the fast client's pong is here,
	// the slow client's replies have all left the agent link's reader.
	start := time.Now()
	fast.request(wire.TypePing, "f", nil)
	if ev := fast.read(); ev.Type != wire.TypePong || ev.ID != "f" {
		t.Fatalf("fast client: got %s %q", ev.Type, ev.ID)
	}
	t.Logf("fast pong after %v", time.Since(start))
	for i := range pings {
		ev := slow.read()
		var got wire.Text
		if ev.Type != wire.TypePong || ev.ID != fmt.Sprintf("s%d", i) || json.Unmarshal(ev.Data, &got) != nil {
			t.Fatalf("slow client, reply %d: got %s %q", i, ev.Type, ev.ID)
		}
		if want := fmt.Sprintf("%d:%s", i, blob); got.Text != want {
			t.Fatalf("slow client, reply %d: %d bytes, want %d (first difference at %d)", i, len(got.Text), len(want), firstDiff(got.Text, want))
		}
	}
}

// firstDiff is the first index where a and b differ.
func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
