package session_test

import (
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A hello is answered only once the agent's start is complete
// (Config.Started), with the hash AgentHash gives: the first request can
// come no sooner.
func TestHelloWaitsForTheStart(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	e := newEnv(t, session.Config{Started: started, AgentHash: func() string { return "sha256:ab" }})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t"}))
	_ = c.ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var early wire.Envelope
	if err := c.ws.ReadJSON(&early); err == nil {
		t.Fatalf("answered %s before the start was complete", early.Type)
	}
	// gorilla's reads end with the timed-out one: a second connection
	// sees the answer once the start is complete.
	close(started)
	c2, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	c2.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t"}))
	answer := c2.next()
	if answer.Type != wire.TypeHello {
		t.Fatalf("answered %s %s", answer.Type, answer.Data)
	}
	hello := decode[wire.Hello](t, answer)
	if hello.AgentHash != "sha256:ab" {
		t.Fatalf("hello %+v: want agent_hash sha256:ab", hello)
	}
}
