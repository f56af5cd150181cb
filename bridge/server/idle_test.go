package server_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// waitNoWriters waits until no goroutine runs a connection writer, the
// client's or the agent link's.
func waitNoWriters(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		client, agent := goroutinesIn("server.(*client).write"), goroutinesIn("agentlink.(*Link).write")
		if client == 0 && agent == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle sessions still run writers: %d client, %d agent", client, agent)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle session keeps no writer goroutine, the client's nor the agent
// link's (wire.Pump): once the hello is written and again once a reply
// is, only the readers wait. Its reader does wait (the count sees
// goroutines at all).
func TestIdleSessionKeepsNoWriters(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	// The relay reads once the attach is done, a moment after the hello
	// answer (the attach's audit entry is written between).
	testutil.Until(t, "both clients' readers", waitFor, func() error {
		if n := goroutinesIn("server.(*client).readPump("); n < 2 {
			return fmt.Errorf("%d client readers for two clients", n)
		}
		return nil
	})
	waitNoWriters(t)
	for i, s := range []*session{a, b, a} {
		id := "p" + string(rune('1'+i))
		s.request(wire.TypePing, id, nil)
		if got := s.read(); got.Type != wire.TypePong || got.ID != id {
			t.Fatalf("got %s %s, want pong %s", got.Type, got.ID, id)
		}
		waitNoWriters(t)
	}
	a.turn("m1", "hi") // events fanned out to both, then idle again
	b.readTurn()
	waitNoWriters(t)
}
