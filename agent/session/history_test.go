package session_test

import (
	"testing"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/bridge/wire"
)

// dialAs connects to thread with a hello of the given role.
func (e *env) dialAs(role, thread string) *client {
	e.t.Helper()
	c, _, err := e.dialRaw(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: role, Thread: thread}))
	if got := c.next(); got.Type != wire.TypeHello {
		e.t.Fatalf("handshake answered %s %s", got.Type, got.Data)
	}
	return c
}

// logged is a thread's logged event as the bridge hands it over.
func logged(seq uint64, typ wire.Type, id string, payload any) wire.Envelope {
	env := wire.MustNew(typ, "t_hist", id, payload)
	env.Seq = seq
	return env
}

// oneTurn is a logged turn: the user's text and the assistant's answer.
func oneTurn(seq uint64, id, user, answer string) []wire.Envelope {
	return []wire.Envelope{
		logged(seq, wire.TypeUserEcho, id, wire.UserMessage{Text: user}),
		logged(seq+1, wire.TypeAssistantMessage, id, wire.Text{Text: answer}),
		logged(seq+2, wire.TypeTurnDone, id, wire.TurnDone{Reason: wire.ReasonStop}),
	}
}

func history(more bool, evs ...wire.Envelope) wire.Envelope {
	return wire.MustNew(wire.TypeHistory, "t_hist", "", wire.History{Events: evs, More: more})
}

// firstRequestSize runs one turn on a thread that got no history and
// returns the size of the model's request.
func firstRequestSize(t *testing.T) int {
	model := &fakeModel{}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model}})
	c := e.dialAs(wire.RoleBridge, "t_hist")
	c.send(userMessage("m", "hi"))
	c.await(wire.TypeTurnDone)
	return model.requests()[0]
}

// History frames from the bridge rebuild a new agent's conversation: they
// collect until the last one, are applied only to an empty conversation,
// and only a bridge may send them.
func TestHistoryFrames(t *testing.T) {
	base := firstRequestSize(t)
	turn1 := oneTurn(1, "m1", "remember 42", "noted")
	turn2 := oneTurn(4, "m2", "and 43", "noted too")
	cases := []struct {
		name   string
		role   string
		before bool            // run a turn before the history arrives
		frames []wire.Envelope // sent in order
		want   int             // messages in the next request past base
		refuse bool            // the first frame is answered not_allowed
	}{
		{name: "one frame", role: wire.RoleBridge, frames: []wire.Envelope{history(false, turn1...)}, want: 2},
		{name: "frames collect until the last", role: wire.RoleBridge,
			frames: []wire.Envelope{history(true, turn1[:1]...), history(true, turn1[1:]...), history(false, turn2...)}, want: 4},
		{name: "a frame with more never applies", role: wire.RoleBridge,
			frames: []wire.Envelope{history(true, turn1...)}, want: 0},
		{name: "kept conversation is not replaced", role: wire.RoleBridge, before: true,
			frames: []wire.Envelope{history(false, append(append([]wire.Envelope{}, turn1...), turn2...)...)}, want: 2},
		{name: "a client may not send history", role: wire.RoleClient,
			frames: []wire.Envelope{history(false, turn1...)}, want: 0, refuse: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeModel{}
			e := newEnv(t, session.Config{Loop: loop.Config{Model: model}})
			c := e.dialAs(tc.role, "t_hist")
			if tc.before {
				c.send(userMessage("m0", "first"))
				c.await(wire.TypeTurnDone)
			}
			for _, f := range tc.frames {
				c.send(f)
			}
			if tc.refuse {
				expectError(t, c.next(), wire.CodeNotAllowed, "")
			}
			// Frames are handled in order on the connection, so the turn
			// sees what they did.
			c.send(userMessage("m9", "which numbers?"))
			c.await(wire.TypeTurnDone)
			sizes := model.requests()
			if got := sizes[len(sizes)-1] - base; got != tc.want {
				t.Fatalf("next request has %d messages past a fresh thread's, want %d (sizes %v)", got, tc.want, sizes)
			}
		})
	}
}
