package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeResume is a fake agent's backlog: its newest events, replayed to a
// bridge after resumed. Unlike the real agent it replays the whole backlog
// whatever the bridge's resume point, so the bridge must drop duplicates.
type fakeResume struct {
	instance string
	max      int
	evs      []wire.Envelope
}

// keepBacklog makes a keep the newest n events and resume (n > 0); its
// numbering starts at 1, as the real agent's does.
func (a *fakeAgent) keepBacklog(n int) {
	if n <= 0 {
		return
	}
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	a.resume = &fakeResume{instance: fmt.Sprintf("fake-%p", a), max: n}
	a.seq = 0
}

// keep adds a numbered event; the caller holds seqMu. A nil r keeps none.
func (r *fakeResume) keep(env wire.Envelope) {
	if r == nil {
		return
	}
	r.evs = append(r.evs, env)
	if len(r.evs) > r.max {
		r.evs = r.evs[len(r.evs)-r.max:]
	}
}

// resumeAnswer answers resume with resumed, events_lost when the backlog
// starts after the bridge's point, and the whole backlog; ok is false for
// other requests and when a keeps no backlog (it then answers
// unknown_type, as an agent without resume would).
func (a *fakeAgent) resumeAnswer(env wire.Envelope) (out []wire.Envelope, ok bool) {
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	r := a.resume
	if r == nil || env.Type != wire.TypeResume {
		return nil, false
	}
	var req wire.Resume
	_ = env.Decode(&req)
	var after uint64
	if req.Instance == r.instance {
		after = req.After
	}
	res := wire.Resumed{Instance: r.instance, After: after, Replayed: len(r.evs), Seq: a.seq}
	for _, ev := range r.evs { // a turn runs from its user_echo to its turn_done
		res.Turn = ev.Type == wire.TypeUserEcho || res.Turn && ev.Type != wire.TypeTurnDone
	}
	res.Busy = res.Turn
	out = append(out, wire.MustNew(wire.TypeResumed, "", env.ID, res))
	if len(r.evs) > 0 && r.evs[0].Seq > after+1 {
		lost := wire.MustNew(wire.TypeEventsLost, "", "", wire.EventsLost{Instance: r.instance, From: after + 1, To: r.evs[0].Seq - 1, Count: r.evs[0].Seq - 1 - after, Message: "fake backlog too short"})
		lost.Seq = r.evs[0].Seq - 1
		out = append(out, lost)
	}
	return append(out, r.evs...), true
}

// detachEmit closes the agent's connections (the sandbox goes on running)
// and then makes n assistant_delta events while no bridge is attached.
func (a *fakeAgent) detachEmit(n int) {
	a.Detach(func() {
		for i := range n {
			a.event(wire.TypeAssistantDelta, "bg", wire.Text{Text: fmt.Sprintf("detached %d", i+1)})
		}
	})
}

// onlyAgent is the fake agent of the only sandbox.
func (e *env) onlyAgent() *fakeAgent {
	e.t.Helper()
	agents := e.mgr.Agents()
	if len(agents) != 1 {
		e.t.Fatalf("%d sandboxes, want 1", len(agents))
	}
	return agents[0]
}

// readN reads n messages.
func (s *session) readN(n int) []wire.Envelope {
	s.t.Helper()
	out := make([]wire.Envelope, 0, n)
	for range n {
		out = append(out, s.read())
	}
	return out
}

// texts lists the assistant_delta texts of evs.
func texts(evs []wire.Envelope) string {
	var out []string
	for _, ev := range evs {
		var tx wire.Text
		if ev.Type == wire.TypeAssistantDelta && ev.Decode(&tx) == nil {
			out = append(out, tx.Text)
		}
	}
	return strings.Join(out, ",")
}

// The agent connection drops while the sandbox runs: the bridge greets the
// agent again with its cursor, and what the agent made meanwhile arrives
// once, after the events already logged (which the fake replays again and
// the bridge drops). A backlog too short to reach back gives events_lost.
func TestAgentResumeAfterLinkDrop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backlog int
		want    string // summary after the turn's 4 events
		lost    uint64
	}{
		{"backlog reaches back", 100, "5:assistant_delta:bg 6:assistant_delta:bg 7:assistant_delta:bg 8:assistant_delta:bg 9:assistant_delta:bg", 0},
		{"backlog too short", 2, "5:events_lost: 6:assistant_delta:bg 7:assistant_delta:bg", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, nil)
			e.mgr.backlog = tc.backlog
			s, _ := e.attach("", 0)
			if got := summary(s.turn("m1", "hi")); got != "1:user_echo:m1 2:assistant_delta:m1 3:assistant_message:m1 4:turn_done:m1" {
				t.Fatalf("turn: %s", got)
			}
			e.onlyAgent().detachEmit(5)
			n := strings.Count(tc.want, " ") + 1
			got := s.readN(n)
			if summary(got) != tc.want {
				t.Fatalf("after the link dropped: %s, want %s", summary(got), tc.want)
			}
			if tc.lost > 0 {
				var l wire.EventsLost
				if err := got[0].Decode(&l); err != nil || l.Count != tc.lost || l.From != 5 || l.To != 7 {
					t.Fatalf("events_lost %+v (%v), want %d events from agent seq 5", l, err, tc.lost)
				}
			} else if txt := texts(got); txt != "detached 1,detached 2,detached 3,detached 4,detached 5" {
				t.Fatalf("texts %s", txt)
			}
			next := fmt.Sprintf("%d:user_echo:m2", n+5)
			if got := summary(s.turn("m2", "again")); !strings.HasPrefix(got, next) {
				t.Fatalf("next turn %s, want it from %s", got, next)
			}
		})
	}
}

// After a bridge restart the adopted agent is greeted with the stored
// cursor: events it made while no bridge ran are logged once, and the
// events the bridge had stored are not logged again.
func TestAgentResumeAfterBridgeRestart(t *testing.T) {
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) { cfg = *c })
	e.mgr.backlog = 100
	s, id := e.attach("", 0)
	s.turn("m1", "hi")
	s.conn.Close()
	e.restart(cfg, func() { e.onlyAgent().detachEmit(3) })

	r, _ := e.attach(id, 4)
	got := r.readN(3)
	if want := "5:assistant_delta:bg 6:assistant_delta:bg 7:assistant_delta:bg"; summary(got) != want {
		t.Fatalf("after restart: %s, want %s", summary(got), want)
	}
	if got := summary(r.turn("m2", "again")); !strings.HasPrefix(got, "8:user_echo:m2") {
		t.Fatalf("next turn %s", got)
	}
	resp := e.exportReq(id, "", testToken)
	all := exported(t, resp)
	if len(all) != 11 || texts(all) != "hello from the model,detached 1,detached 2,detached 3,hello from the model" {
		t.Fatalf("log %s; texts %s", summary(all), texts(all))
	}
}

// Output the bridge keeps back (the end of a chunk could start a secret)
// is covered by the stored cursor and restored with it: across a restart
// no byte of it is lost or logged twice.
func TestHeldOutputSurvivesRestart(t *testing.T) {
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) { cfg = *c })
	e.mgr.backlog = 100
	s, id := e.attach("", 0)
	s.turn("m1", "hi")
	a := e.onlyAgent()
	out := func(text string) { a.event(wire.TypeToolOutput, "r1", wire.ToolOutput{CallID: "c1", Output: text}) }
	a.Detach(func() { out("part one tok") }) // "tok" may go on in the next chunk: kept back
	if got := s.read(); got.Type != wire.TypeToolOutput || !strings.Contains(string(got.Data), `"part one "`) {
		t.Fatalf("first chunk %s %s", got.Type, got.Data)
	}
	s.conn.Close()
	e.restart(cfg, func() {
		out("en rest\n")
		a.event(wire.TypeToolResult, "r1", wire.ToolResult{CallID: "c1", Name: "execute", Output: "part one token rest\n"})
	})
	r, _ := e.attach(id, 0)
	var text strings.Builder
	for {
		ev := r.read()
		var o wire.ToolOutput
		if ev.Type == wire.TypeToolOutput && ev.Decode(&o) == nil {
			text.WriteString(o.Output)
		}
		if ev.Type == wire.TypeToolResult {
			break
		}
	}
	if text.String() != "part one token rest\n" {
		t.Fatalf("streamed output %q", text.String())
	}
}

// resume and resumed are between the bridge and the agent: a client's is
// refused, not forwarded.
func TestClientCannotResumeTheAgent(t *testing.T) {
	e := newEnv(t)
	s, _ := e.attach("", 0)
	for _, typ := range []wire.Type{wire.TypeResume, wire.TypeResumed} {
		s.request(typ, "x", wire.Resume{After: 0})
		if got := s.read(); got.Type != wire.TypeError || got.ID != "x" || !strings.Contains(string(got.Data), string(wire.CodeNotAllowed)) {
			t.Fatalf("%s answered %s %s", typ, got.Type, got.Data)
		}
	}
}
