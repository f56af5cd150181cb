package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// turnEndAnswer takes "hang:" messages: the fake agent starts the turn and
// a command (user_echo, tool_call, some output) and then sends nothing, as
// if the command ran on. "late:" messages get, first, the old agent's own
// end of the hung turn (a tool_result and a turn_done for m1), then an
// ordinary turn.
func (a *fakeAgent) turnEndAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	var m wire.UserMessage
	if env.Type != wire.TypeUserMessage || env.Decode(&m) != nil {
		return nil, false
	}
	hungID := strings.Replace(env.ID, "/m", "/hung-", 1) // the same connection's m1
	switch {
	case strings.HasPrefix(m.Text, "hang:"):
		return []wire.Envelope{
			a.event(wire.TypeUserEcho, env.ID, m),
			a.event(wire.TypeToolCall, env.ID, wire.ToolCall{CallID: "call_hang", Name: "execute", Arguments: []byte(`{"command":"sleep 5"}`)}),
			a.event(wire.TypeToolOutput, env.ID, wire.ToolOutput{CallID: "call_hang", Output: "started\r\n"}),
		}, true
	case strings.HasPrefix(m.Text, "late:"):
		code := 0
		return []wire.Envelope{
			a.event(wire.TypeToolOutput, hungID, wire.ToolOutput{CallID: "call_hang", Output: "late\r\n"}),
			a.event(wire.TypeToolResult, hungID, wire.ToolResult{CallID: "call_hang", Name: "execute", ExitCode: &code}),
			a.event(wire.TypeTurnDone, hungID, wire.TurnDone{Reason: wire.ReasonStop}),
			a.event(wire.TypeUserEcho, env.ID, m),
			a.event(wire.TypeAssistantMessage, env.ID, wire.Text{Text: "ok"}),
			a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop}),
		}, true
	}
	return nil, false
}

// readThrough reads messages up to and including the first of type typ.
func (s *session) readThrough(typ wire.Type) []wire.Envelope {
	s.t.Helper()
	var evs []wire.Envelope
	for {
		env := s.read()
		evs = append(evs, env)
		if env.Type == typ {
			return evs
		}
	}
}

// checkEnded asserts that evs hold exactly one tool_result for call_hang
// with status sandbox_lost and then exactly one turn_done sandbox_lost,
// both with the turn's id.
func checkEnded(t *testing.T, evs []wire.Envelope, id string) {
	t.Helper()
	var results, dones int
	for _, env := range evs {
		switch env.Type {
		case wire.TypeToolResult:
			var r wire.ToolResult
			if err := env.Decode(&r); err != nil || r.CallID != "call_hang" || r.Status != wire.StatusSandboxLost || r.Error == "" || env.ID != id {
				t.Errorf("tool_result %s id %q (%v); want call_hang, sandbox_lost with an error, id %s", env.Data, env.ID, err, id)
			}
			if dones > 0 {
				t.Errorf("tool_result after turn_done: %s", summary(evs))
			}
			results++
		case wire.TypeTurnDone:
			var d wire.TurnDone
			if err := env.Decode(&d); err != nil || d.Reason != wire.ReasonSandboxLost || env.ID != id {
				t.Errorf("turn_done %s id %q; want sandbox_lost, id %s", env.Data, env.ID, id)
			}
			dones++
		}
	}
	if results != 1 || dones != 1 {
		t.Errorf("%d tool_result, %d turn_done in %s; want one each", results, dones, summary(evs))
	}
}

// A sandbox that dies while a command of a turn runs: the bridge ends the
// command (tool_result sandbox_lost) and the turn (turn_done sandbox_lost)
// between sandbox_exited and sandbox_replaced, and the next turn runs in
// the replacement.
func TestSandboxDeathEndsTheTurn(t *testing.T) {
	e := newEnv(t)
	s, _ := e.attach("", 0)
	s.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: "hang: sleep 5"})
	s.readThrough(wire.TypeToolOutput)
	_, specs, _, _ := e.mgr.State()
	e.mgr.Kill(e.sandboxIDOf(specs[len(specs)-1]), 137, false)

	evs := s.readThrough(wire.TypeSandboxReplaced)
	if evs[0].Type != wire.TypeSandboxExited {
		t.Errorf("first after the kill: %s, want sandbox_exited", summary(evs))
	}
	checkEnded(t, evs, "m1")
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Errorf("seqs not contiguous: %s", summary(evs))
		}
	}
	if got := s.turn("m2", "hi"); got[len(got)-1].ID != "m2" {
		t.Errorf("next turn: %s", summary(got))
	}
}

// The agent connection drops while the sandbox runs and the agent that
// answers again is another process (it restarted): it runs neither the
// command nor the turn, so the bridge ends them once; what the old turn's
// agent sends later for them is dropped.
func TestRestartedAgentEndsTheTurnOnce(t *testing.T) {
	e := newEnv(t)
	e.mgr.backlog = 100
	s, _ := e.attach("", 0)
	s.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: "hang: sleep 5"})
	s.readThrough(wire.TypeToolOutput)
	a := e.onlyAgent()
	a.Detach(func() { // a new process: new instance, empty backlog
		a.seqMu.Lock()
		a.resume.instance, a.resume.evs, a.seq = fmt.Sprintf("restarted-%p", a), nil, 0
		a.seqMu.Unlock()
	})
	checkEnded(t, s.readThrough(wire.TypeTurnDone), "m1")

	evs := s.turn("m3", "late: hi")
	if len(evs) != 3 || evs[0].Type != wire.TypeUserEcho || evs[0].ID != "m3" {
		t.Errorf("after the bridge ended m1: %s; want only m3's user_echo, assistant_message, turn_done", summary(evs))
	}
}
