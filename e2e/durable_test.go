package e2e_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// A user_message the bridge wrote to the agent is in flight until the
// agent answers it. Here the sandbox is paused so it cannot answer, the
// bridge is killed with SIGKILL and the sandbox removed while it is down:
// the restarted bridge suspends the thread, and the client that comes back
// resumes it in a new sandbox, which is sent the stored request after its
// replay. The turn runs there once, with the conversation from before.
func TestDurableRequestInFlightSurvivesBridgeKill(t *testing.T) {
	e := newEnv(t, faultsScript)
	b := e.startBridge()
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	id := e.killWithRequestInFlight(b, s, func(question string) { e.awaitStoredInflight(thread, question) }) // pgstore_test.go

	e.startBridge()
	echoes := e.dial(thread).echoesUntilDone(id, nil)
	if echoes != 1 {
		t.Errorf("%d user_echo events for the request, want 1", echoes)
	}
	if ok, msgs := e.rememberedIn("remember the number 42", "Noted: the number is 42."); !ok {
		t.Errorf("the model was not sent the earlier conversation; last request: %s", msgs)
	}
	if !strings.Contains(e.bridge.logText(), "requests in flight before the restart") {
		t.Errorf("the restarted bridge did not log the stored request")
	}
}

// kill -9 of the bridge while a command runs, then a restart before the
// sandbox reaches its maximum lifetime: the adopted agent says in resumed
// that the command still runs, so the recycle at the lifetime waits for
// it (a safe point) instead of taking the adopted thread for idle.
func TestDurableAdoptedCommandNotRecycled(t *testing.T) {
	lifetime := []string{"BOXWIRE_MAX_LIFETIME=20s", "BOXWIRE_REAP_INTERVAL=200ms"}
	e := newEnv(t, faultsScript)
	b := e.startBridge(lifetime...)
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	// Runs past the lifetime (20 s from the sandbox's creation).
	id := w.run(t, "execute", map[string]any{"command": "echo started; sleep 25; echo finished", "timeout": 300})
	book.await(t, "the command's start", eventTimeout, func(wire.Envelope) bool {
		return strings.Contains(outputOf(book.events(), id), "started")
	})
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.done
	w.close()
	after := book.last()

	nb := e.startBridge(lifetime...)
	e.watch(w.thread, after, book)
	var res wire.ToolResult
	mustDecode(t, book.await(t, "tool_result", turnTimeout, isType(wire.TypeToolResult, id)), &res)
	if exitCode(res) != 0 || !strings.Contains(outputOf(book.events(), id), "finished") {
		t.Fatalf("command result %+v: it did not run to its end", res)
	}
	var ex wire.SandboxExited
	mustDecode(t, book.await(t, "sandbox_exited", turnTimeout, isType(wire.TypeSandboxExited, "")), &ex)
	if ex.Reason != wire.ExitLifetime || strings.Contains(ex.Message, "interrupted") {
		t.Errorf("sandbox_exited %+v", ex)
	}
	if !strings.Contains(nb.logText(), "waits for its work to end") {
		t.Errorf("the adopted sandbox was not held for its command")
	}
	book.check(t)
}
