package e2e_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// The kill matrix's small language: a watcher says something (a turn),
// the test waits for the turn to reach a phase, kills one part, and then
// checks the turn's end in the book.

// killScript answers "run the command" with a command that prints
// "started", waits and leaves a mark in the workspace, then a short text;
// "tell a story" with text streamed slowly; "tell a broken story" with a
// stream the model endpoint breaks off halfway; anything else with "ok".
const killScript = `{"model":"scripted","turns":[
  {"when":"run the command","steps":[
    {"tool_calls":[{"name":"execute","arguments":{"command":"echo started; sleep 3; touch /workspace/.cmd-done; echo finished","timeout":120}}]},
    {"content":"the command is done"}]},
  {"when":"run the failing command","steps":[
    {"tool_calls":[{"name":"execute","arguments":{"command":"echo started","timeout":60}}]},
    {"error":{"status":503,"message":"the model is overloaded"}}]},
  {"when":"tell a story","steps":[{"content":"once upon a time there was a sandbox that streamed a story one small word at a time, slowly, so that something could go wrong in the middle of it, and then the story ended","chunk_delay_ms":150}]},
  {"when":"tell a broken story","steps":[{"content":"once upon a time a model endpoint died in the middle of a sentence and never","chunk_delay_ms":40,"cut_after_chunks":5}]},
  {"steps":[{"content":"ok"}]}
]}`

// say sends a user_message on w without waiting and returns its id. Only
// the test goroutine writes to w.
func (w *watcher) say(t *testing.T, text string) string {
	t.Helper()
	id := "km-" + randHex(6)
	data, err := wire.Marshal(wire.MustNew(wire.TypeUserMessage, w.thread, id, wire.UserMessage{Text: text}))
	if err != nil {
		t.Fatal(err)
	}
	_ = w.ws.SetWriteDeadline(time.Now().Add(eventTimeout))
	if err := w.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		t.Fatalf("send user_message: %v", err)
	}
	return id
}

// turnEvents returns the events of turn id in the book, each seq once.
func turnEvents(b *seqBook, id string) []wire.Envelope {
	var out []wire.Envelope
	seen := map[uint64]bool{}
	for _, ev := range b.events() {
		if ev.ID == id && !seen[ev.Seq] {
			seen[ev.Seq] = true
			out = append(out, ev)
		}
	}
	return out
}

// turnDones returns the turn_done events of turn id in the book.
func turnDones(b *seqBook, id string) []wire.TurnDone {
	var out []wire.TurnDone
	for _, ev := range turnEvents(b, id) {
		if ev.Type != wire.TypeTurnDone {
			continue
		}
		var d wire.TurnDone
		_ = ev.Decode(&d)
		out = append(out, d)
	}
	return out
}

// awaitTurnEnd waits for turn id's turn_done and then checks, on a
// quiet thread, that it came once and that every tool_call of the turn
// got exactly one tool_result. It returns the turn's end.
func awaitTurnEnd(t *testing.T, b *seqBook, id string) (wire.TurnDone, []wire.ToolResult) {
	t.Helper()
	testutil.Until(t, "turn_done of "+id, turnTimeout, func() error {
		if len(turnDones(b, id)) > 0 {
			return nil
		}
		var got []string
		for _, ev := range b.events() {
			got = append(got, fmt.Sprintf("%d:%s:%s", ev.Seq, ev.Type, ev.ID))
		}
		return fmt.Errorf("got %s", strings.Join(got, " "))
	})
	var calls []string
	results := map[string][]wire.ToolResult{}
	for _, ev := range turnEvents(b, id) {
		switch ev.Type {
		case wire.TypeToolCall:
			var c wire.ToolCall
			_ = ev.Decode(&c)
			calls = append(calls, c.CallID)
		case wire.TypeToolResult:
			var r wire.ToolResult
			_ = ev.Decode(&r)
			results[r.CallID] = append(results[r.CallID], r)
		}
	}
	var all []wire.ToolResult
	for _, c := range calls {
		if n := len(results[c]); n != 1 {
			t.Errorf("call %s of turn %s has %d tool_result, want 1", c, id, n)
		}
		all = append(all, results[c]...)
	}
	dones := turnDones(b, id)
	if len(dones) != 1 {
		t.Fatalf("turn %s has %d turn_done %+v, want exactly 1", id, len(dones), dones)
	}
	return dones[0], all
}

// killAgent kills the agent process of container c with SIGKILL; the
// exec may end with the container, so its error is only logged.
func killAgent(t *testing.T, c string) {
	out, err := exec.Command("docker", "exec", c, "pkill", "-KILL", "-x", "boxwire-agent").CombinedOutput()
	t.Logf("docker exec pkill: err=%v out=%q", err, out)
}

// dockerKill kills container c as the engine does.
func dockerKill(t *testing.T, c string) {
	if out, err := exec.Command("docker", "kill", "-s", "KILL", c).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
}

// killBridge SIGKILLs the running bridge and waits for it to be gone.
func (e *env) killBridge(t *testing.T) {
	if err := e.bridge.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.bridge.done
}

// awaitFile waits until path exists in container c.
func awaitFile(t *testing.T, c, path string) {
	t.Helper()
	waitFor(t, path+" in the sandbox", func() bool {
		return exec.Command("docker", "exec", c, "test", "-e", path).Run() == nil
	})
}

// deleteAndCheck deletes the thread and waits until its sandbox is gone:
// nothing of it is left behind.
func (e *env) deleteAndCheck(thread string) {
	e.t.Helper()
	if code := e.api(http.MethodDelete, "/v1/threads/"+thread, nil, nil); code != http.StatusNoContent {
		e.t.Fatalf("delete thread %s: %d", thread, code)
	}
	waitFor(e.t, "the thread's sandbox removed", func() bool {
		return len(e.containers(map[string]string{"boxwire.thread": thread})) == 0
	})
}

// streamedText is the assistant_delta text of turn id so far.
func streamedText(b *seqBook, id string) string {
	var sb strings.Builder
	for _, ev := range turnEvents(b, id) {
		var tx wire.Text
		if ev.Type == wire.TypeAssistantDelta && ev.Decode(&tx) == nil {
			sb.WriteString(tx.Text)
		}
	}
	return sb.String()
}
