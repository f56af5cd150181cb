package server_test

import (
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

func TestAgentDeath(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	a.turn("m1", "hi")
	b.readTurn()
	e.mgr.kill("sb1", 137, true)
	for _, s := range []*session{a, b} {
		ev := s.read()
		var exit wire.SandboxExited
		if ev.Type != wire.TypeSandboxExited || ev.Seq != 5 || ev.Decode(&exit) != nil || exit.Reason != wire.ExitOOM || *exit.ExitCode != 137 {
			t.Fatalf("got %s seq %d %s", ev.Type, ev.Seq, ev.Data)
		}
		ev = s.read()
		var werr wire.Error
		if ev.Type != wire.TypeError || ev.Seq != 6 || ev.Decode(&werr) != nil || werr.Code != wire.CodeSandboxUnavailable {
			t.Fatalf("got %s seq %d %s", ev.Type, ev.Seq, ev.Data)
		}
		if !strings.Contains(werr.Message, "sandbox stopped: exit code 137") || !strings.Contains(werr.Message, "memory") {
			t.Fatalf("message %q", werr.Message)
		}
	}
	a.request(wire.TypePing, "p", nil)
	if e := a.readError(wire.CodeSandboxUnavailable); e.Message == "" {
		t.Fatal("empty message")
	}
	// The error stays in the log for clients that come later.
	c, _ := e.attach(id, 4)
	if ev := c.read(); ev.Type != wire.TypeSandboxExited {
		t.Fatalf("replay: got %s", ev.Type)
	}
	c.readError(wire.CodeSandboxUnavailable)
}

func TestSlowClientDropped(t *testing.T) {
	e := newEnv(t)
	fast, id := e.attach("", 0)
	slow := e.openSmallBuffer(id) // never reads until the flood is over
	fast.request(wire.TypeUserMessage, "f", wire.UserMessage{Text: "flood 600"})
	events := fast.readTurn()
	if len(events) != 602 || events[601].Seq != 602 {
		t.Fatalf("fast client got %d events", len(events))
	}
	if code := slow.expectClosed(); code != websocket.CloseTryAgainLater {
		t.Fatalf("slow client close code %d", code)
	}
	// It can come back and catch up from the log.
	again, _ := e.attach(id, 600)
	if s := summary(again.readTurn()); s != "601:assistant_delta:f 602:turn_done:f" {
		t.Fatalf("catch up %s", s)
	}
}
