package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A thread's own approval policy is kept in the store: after a restart
// (adoption) and after a suspension (resumption) it still decides.
func TestThreadPolicySurvivesRestartAndSuspend(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.IdleTTL = 300 * time.Millisecond
		c.ReapInterval = 50 * time.Millisecond
	})
	code, info, werr := e.createThread(`{"policy": {"rules": [{"tool": "delete_file", "action": "deny", "reason": "thread says never"}]}}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, werr)
	}
	check := func(when string) {
		t.Helper()
		s, _ := e.attach(info.ID, 0)
		defer s.conn.Close()
		id := "m-" + when
		s.request(wire.TypeUserMessage, id, wire.UserMessage{Text: `check delete_file {"path":"x"}`})
		var events []wire.Envelope // this turn's only: the attach replays the earlier ones
		for env := s.read(); env.Type != wire.TypeTurnDone || env.ID != id; env = s.read() {
			if env.ID == id {
				events = append(events, env)
			}
		}
		got := finalText(t, events)
		if !strings.Contains(got, "thread says never") {
			t.Errorf("%s: delete_file %q, want the thread's denial", when, got)
		}
	}
	check("before")
	e.restart(e.config(func(c *server.Config) { c.ReapInterval = time.Hour }), nil)
	check("adopted")
	e.restart(e.config(func(c *server.Config) {
		c.IdleTTL = 300 * time.Millisecond
		c.ReapInterval = 50 * time.Millisecond
	}), nil)
	e.awaitStatus(info.ID, wire.SandboxSuspended)
	check("resumed")
}
