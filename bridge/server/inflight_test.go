package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// swallow is the fake agents' shared state for "swallow:" messages: the
// first agent to read one keeps it unanswered (as if its container died
// the moment the request reached it) and says so on read; later agents
// answer it like any message.
var swallow struct {
	mu    sync.Mutex
	seen  map[string]bool
	read  chan string
	again int // "unsent:" messages read more than once
}

// inflightAnswer also takes "unsent:" messages: the first agent to read
// one starts the turn (its user_echo goes to the backlog) but sends
// nothing, as if the link died with the echo queued; it counts later
// reads and answers them like any message.
func (a *fakeAgent) inflightAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	var m wire.UserMessage
	if env.Type != wire.TypeUserMessage || env.Decode(&m) != nil {
		return nil, false
	}
	unsent := strings.HasPrefix(m.Text, "unsent:")
	if !strings.HasPrefix(m.Text, "swallow:") && !unsent {
		return nil, false
	}
	swallow.mu.Lock()
	defer swallow.mu.Unlock()
	if swallow.seen[m.Text] {
		if unsent {
			swallow.again++
		}
		return nil, false // the common answer
	}
	swallow.seen[m.Text] = true
	if unsent {
		a.event(wire.TypeUserEcho, env.ID, m)
	}
	swallow.read <- m.Text
	return []wire.Envelope{}, true
}

// A user_message the agent read but never answered before its sandbox
// died is handed to the replacement agent: the turn runs there, once.
func TestRequestInFlightWhenSandboxDiesIsResent(t *testing.T) {
	swallow.mu.Lock()
	swallow.seen, swallow.read = map[string]bool{}, make(chan string, 1)
	swallow.mu.Unlock()
	e := newEnv(t)
	s, _ := e.attach("", 0)
	s.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: "swallow: hello"})
	testutil.RequireReceive(t, "the agent reading the message", swallow.read, waitFor)
	_, specs, _, _ := e.mgr.State()
	e.mgr.Kill(e.sandboxIDOf(specs[len(specs)-1]), 137, false)

	var echoes, dones int
	var replaced bool
	for dones == 0 {
		env := s.read()
		switch {
		case env.Type == wire.TypeSandboxReplaced:
			replaced = true
		case env.Type == wire.TypeUserEcho && env.ID == "m1":
			echoes++
		case env.Type == wire.TypeTurnDone && env.ID == "m1":
			dones++
		case env.Type == wire.TypeError:
			t.Fatalf("error instead of the turn: %s", env.Data)
		}
	}
	if !replaced || echoes != 1 {
		t.Errorf("replaced %v, %d echoes of m1; want the replacement and one echo", replaced, echoes)
	}
}

// gapAnswer makes a fake agent skip agent seqs before it answers a
// "skip N: …" message, as if N events never reached the bridge; the
// common answer then runs the turn.
func (a *fakeAgent) gapAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	var m wire.UserMessage
	if env.Type != wire.TypeUserMessage || env.Decode(&m) != nil {
		return nil, false
	}
	var n uint64
	if _, err := fmt.Sscanf(m.Text, "skip %d:", &n); err == nil {
		a.seqMu.Lock()
		a.seq += n
		a.seqMu.Unlock()
	}
	return nil, false
}

// A gap in the agent's numbering that the agent did not report itself is
// published by the bridge as events_lost, before the event after it —
// never a silent hole.
func TestBridgeReportsAgentSeqGap(t *testing.T) {
	e := newEnv(t)
	e.mgr.backlog = 100
	s, _ := e.attach("", 0)
	s.turn("m1", "hi")
	evs := s.turn("m2", "skip 3: hi")
	if len(evs) == 0 || evs[0].Type != wire.TypeEventsLost {
		t.Fatalf("turn after the gap: %s, want events_lost first", summary(evs))
	}
	var lost wire.EventsLost
	if err := evs[0].Decode(&lost); err != nil || lost.Count != 3 || lost.To-lost.From != 2 {
		t.Errorf("events_lost %+v (%v), want 3 agent seqs", lost, err)
	}
	if evs[1].Type != wire.TypeUserEcho || evs[1].Seq != evs[0].Seq+1 {
		t.Errorf("after events_lost: %s", summary(evs[1:]))
	}
}
