package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A user_message the agent took but had not answered when the bridge went
// down is kept in the store and, once the adopted agent's replay is
// processed, sent again: unanswered, it runs once; answered in the replay
// (its user_echo was queued on the dead link), it is not sent again.
func TestRequestInFlightSurvivesBridgeRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		done bool // the turn ends (the fake answers the request sent again)
	}{
		{"unanswered: sent again", "swallow: restart", true},
		{"answered in the replay: not sent again", "unsent: restart", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			swallow.mu.Lock()
			swallow.seen, swallow.read, swallow.again = map[string]bool{}, make(chan string, 1), 0
			swallow.mu.Unlock()
			var cfg server.Config
			e := newEnvWith(t, func(c *server.Config) { cfg = *c })
			e.mgr.backlog = 100
			s, id := e.attach("", 0)
			s.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: tc.text})
			testutil.RequireReceive(t, "the agent reading the message", swallow.read, waitFor)
			s.conn.Close()
			e.restart(cfg, nil)

			r, _ := e.attach(id, 0)
			if tc.done {
				r.readUntil(wire.TypeTurnDone)
			} else {
				r.readUntil(wire.TypeUserEcho)
			}
			got := summary(r.turn("m2", "after"))
			all := summary(exported(t, e.exportReq(id, "", testToken)))
			if n := strings.Count(all, "user_echo:m1"); n != 1 || !strings.Contains(got, "user_echo:m2") {
				t.Fatalf("log %s: %d echoes of m1, want 1", all, n)
			}
			swallow.mu.Lock()
			again := swallow.again
			swallow.mu.Unlock()
			if again != 0 {
				t.Fatalf("the agent got the answered request %d more times", again)
			}
		})
	}
}

// An adopted thread whose agent says it is mid-turn counts as working: a
// maximum-lifetime recycle waits for the turn to end.
func TestAdoptedBusyThreadDelaysRecycle(t *testing.T) {
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) {
		c.MaxLifetime = 4 * time.Second // from a creation time in whole seconds
		c.ReapInterval = 50 * time.Millisecond
		c.RecycleGrace = time.Hour
		cfg = *c
	})
	e.mgr.backlog = 100
	s, id := e.attach("", 0)
	s.request(wire.TypeUserMessage, "h1", wire.UserMessage{Text: "hold"})
	s.readUntil(wire.TypeUserEcho)
	s.conn.Close()
	e.restart(cfg, nil)

	r, _ := e.attach(id, 1)
	e.awaitLog("waits for its work to end", 1)
	if live, specs, _, _ := e.mgr.State(); live != 1 || len(specs) != 1 {
		t.Fatalf("recycled during the turn: %d live, %d created", live, len(specs))
	}
	r.request(wire.TypeUserMessage, "r1", wire.UserMessage{Text: "release"})
	var ex wire.SandboxExited
	if err := r.readUntil(wire.TypeSandboxExited).Decode(&ex); err != nil || ex.Reason != wire.ExitLifetime || strings.Contains(ex.Message, "interrupted") {
		t.Fatalf("sandbox_exited %+v (%v)", ex, err)
	}
	r.readUntil(wire.TypeSandboxReplaced)
}
