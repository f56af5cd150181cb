package e2e_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The kill matrix (issue 15): one part dies — the sandbox, the agent
// process, the bridge, the model endpoint, the client's connection —
// while a turn runs a command or streams the model's text. Every turn
// ends with exactly one turn_done (and every tool call with one
// tool_result), the client's view of the log has every seq once, the
// thread runs the next turn, and deleting it leaves nothing behind.

// killCase is one row: what dies, and what the turn's end must be.
type killCase struct {
	name string
	// kill breaks the part while the turn is in the phase; it returns the
	// watcher to read on afterwards (a new one after a reconnect).
	kill func(t *testing.T, e *env, w *watcher, book *seqBook) *watcher
	// reasons are the turn_done reasons allowed.
	reasons []string
	// lost is set when the command's tool_result must say sandbox_lost.
	lost bool
}

func killCases() []killCase {
	sandboxLost := []string{wire.ReasonSandboxLost}
	return []killCase{
		{name: "sandbox", reasons: sandboxLost, lost: true,
			kill: func(t *testing.T, e *env, w *watcher, _ *seqBook) *watcher {
				dockerKill(t, e.containerOf(w.thread))
				return w
			}},
		{name: "agent process", reasons: sandboxLost, lost: true,
			kill: func(t *testing.T, e *env, w *watcher, _ *seqBook) *watcher {
				killAgent(t, e.containerOf(w.thread))
				return w
			}},
		{name: "bridge", reasons: []string{wire.ReasonStop, wire.ReasonError},
			kill: func(t *testing.T, e *env, w *watcher, book *seqBook) *watcher {
				e.killBridge(t)
				w.close()
				e.startBridge()
				return e.watch(w.thread, book.last(), book)
			}},
		{name: "client connection", reasons: []string{wire.ReasonStop},
			kill: func(t *testing.T, e *env, w *watcher, book *seqBook) *watcher {
				w.drop()
				return e.watch(w.thread, book.last(), book)
			}},
	}
}

func TestKillMatrix(t *testing.T) {
	phases := []struct {
		name, say string
		reached   func(b *seqBook, id string) bool
	}{
		{"mid-command", "please run the command", func(b *seqBook, id string) bool {
			return strings.Contains(outputOf(b.events(), id), "started")
		}},
		{"mid-stream", "please tell a story", func(b *seqBook, id string) bool {
			return len(streamedText(b, id)) > 20
		}},
	}
	for _, kc := range killCases() {
		for _, ph := range phases {
			t.Run(kc.name+"/"+ph.name, func(t *testing.T) {
				e := newEnv(t, killScript)
				e.startBridge()
				e.cleanAtEnd()
				book := newSeqBook()
				w := e.watch("", 0, book)
				id := w.say(t, ph.say)
				book.await(t, ph.name, turnTimeout, func(wire.Envelope) bool { return ph.reached(book, id) })
				w = kc.kill(t, e, w, book)

				done, results := awaitTurnEnd(t, book, id)
				if !slices.Contains(kc.reasons, done.Reason) {
					t.Errorf("turn ended %q, want one of %v", done.Reason, kc.reasons)
				}
				if kc.lost && ph.name == "mid-command" {
					if len(results) != 1 || results[0].Status != wire.StatusSandboxLost || results[0].Error == "" {
						t.Errorf("command's result %+v, want one with status %s and an error", results, wire.StatusSandboxLost)
					}
				}
				if kc.lost { // requests wait for the replacement's agent
					book.await(t, "sandbox_replaced", turnTimeout, isType(wire.TypeSandboxReplaced, ""))
				}
				next := w.say(t, "are you there?")
				if d, _ := awaitTurnEnd(t, book, next); d.Reason != wire.ReasonStop {
					t.Errorf("next turn ended %q", d.Reason)
				}
				top := book.check(t)
				e.deleteAndCheck(w.thread)
				t.Logf("%s %s: turn ended %q; seqs 1..%d", kc.name, ph.name, done.Reason, top)
			})
		}
	}
}

// A bridge killed and restarted while the command runs, so that the
// agent's next model call meets no bridge: the agent retries it until the
// bridge is back, and the turn ends normally (before, it ended with
// llm_error).
func TestKillBridgeModelCallRetried(t *testing.T) {
	e := newEnv(t, killScript)
	e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	id := w.say(t, "please run the command")
	book.await(t, "the command's start", turnTimeout, func(wire.Envelope) bool {
		return strings.Contains(outputOf(book.events(), id), "started")
	})
	c := e.containerOf(w.thread)
	e.killBridge(t)
	w.close()
	awaitFile(t, c, "/workspace/.cmd-done") // the model call is due now
	e.startBridge()
	e.watch(w.thread, book.last(), book)
	done, results := awaitTurnEnd(t, book, id)
	if done.Reason != wire.ReasonStop || len(results) != 1 || exitCode(results[0]) != 0 {
		t.Errorf("turn ended %q with results %+v; want stop after the command", done.Reason, results)
	}
	if _, bad := find(book.events(), isType(wire.TypeError, id)); bad {
		t.Errorf("an error in the turn: the model call was not retried")
	}
	book.check(t)
}

// The model endpoint fails while the turn runs (it answers the step after
// the command with an error): the turn ends once, with error, after an
// llm_error, and the next turn runs.
func TestKillModelEndpointMidTurn(t *testing.T) {
	e := newEnv(t, killScript)
	e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	id := w.say(t, "please run the failing command")
	done, results := awaitTurnEnd(t, book, id)
	if done.Reason != wire.ReasonError || len(results) != 1 {
		t.Errorf("turn ended %q with results %+v; want error after the command", done.Reason, results)
	}
	if _, ok := find(book.events(), isType(wire.TypeError, id)); !ok {
		t.Errorf("no llm_error before the turn's end")
	}
	if d, _ := awaitTurnEnd(t, book, w.say(t, "are you there?")); d.Reason != wire.ReasonStop {
		t.Errorf("next turn ended %q", d.Reason)
	}
	book.check(t)
	e.deleteAndCheck(w.thread)
}

// The model endpoint breaks off mid-stream after some text reached the
// client: the call is not retried (it would repeat delivered text), so the
// turn ends once, with error, after an llm_error; the next turn runs.
func TestKillModelEndpointMidStream(t *testing.T) {
	e := newEnv(t, killScript)
	e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	id := w.say(t, "tell a broken story")
	done, _ := awaitTurnEnd(t, book, id)
	if done.Reason != wire.ReasonError {
		t.Errorf("turn ended %q; want error", done.Reason)
	}
	if _, ok := find(book.events(), isType(wire.TypeAssistantDelta, id)); !ok {
		t.Errorf("no text reached the client before the cut")
	}
	if _, ok := find(book.events(), isType(wire.TypeError, id)); !ok {
		t.Errorf("no llm_error before the turn's end")
	}
	if d, _ := awaitTurnEnd(t, book, w.say(t, "are you there?")); d.Reason != wire.ReasonStop {
		t.Errorf("next turn ended %q", d.Reason)
	}
	book.check(t)
	e.deleteAndCheck(w.thread)
}
