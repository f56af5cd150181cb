package e2e_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// oomMemory is the sandbox's memory limit in TestCommandOutOfMemory:
// small, so that the hogs reach it at once.
const oomMemory = 128 << 20

// oomScript runs a command that allocates past the limit, then the same
// as a background job that the model follows with job_output once it has
// had time to die, then a command that shows the sandbox goes on.
const oomScript = `{"turns":[{"when":"hog","steps":[
  {"content":"Allocating.","tool_calls":[
    {"id":"hog","name":"execute","arguments":{"command":"echo allocating; python3 -c 'x = []\nwhile True: x.append(bytearray(16 << 20))'","timeout":60}}]},
  {"tool_calls":[
    {"id":"bg","name":"execute","arguments":{"command":"python3 -c 'x = []\nwhile True: x.append(bytearray(16 << 20))'","background":true}}]},
  {"tool_calls":[
    {"id":"pause","name":"execute","arguments":{"command":"sleep 3; echo after"}}]},
  {"tool_calls":[
    {"id":"out","name":"job_output","arguments":{"id":"j2"}},
    {"id":"alive","name":"execute","arguments":{"command":"echo still here"}}]},
  {"content":"It ran out of memory."}
]},
{"steps":[{"content":"I only know scripted answers."}]}]}`

// TestCommandOutOfMemory: a command the kernel's OOM killer ends inside a
// sandbox with a small memory limit comes back as oom_killed, exit 137,
// with an error naming the limit — in the foreground and, once it ended,
// as a background job in job_output —, the model reads it, and the turn
// and the sandbox go on.
func TestCommandOutOfMemory(t *testing.T) {
	e := newEnv(t, oomScript)
	e.startBridge("BOXWIRE_MEMORY_BYTES=" + strconv.Itoa(oomMemory))
	s := e.dial("")
	events, done := s.turn("hog memory")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	results := map[string]wire.ToolResult{}
	for _, ev := range events {
		switch ev.Type {
		case wire.TypeToolResult:
			var r wire.ToolResult
			mustDecode(t, ev, &r)
			results[r.CallID] = r
		case wire.TypeSandboxExited:
			t.Fatalf("the sandbox stopped: %s", ev.Data)
		}
	}
	const want = "killed for running out of memory: the sandbox's limit is 128 MiB"
	for _, id := range []string{"hog", "out"} {
		r := results[id]
		t.Logf("%s: status %q, exit %d, error %q", id, r.Status, exitCode(r), r.Error)
		if r.Status != wire.StatusOOMKilled || exitCode(r) != 137 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: result %+v, want oom_killed, exit 137, error saying %q", id, r, want)
		}
	}
	if r := results["hog"]; !strings.Contains(r.Output, "allocating") {
		t.Errorf("hog: output %q lacks the command's", r.Output)
	}
	if r := results["out"]; !strings.Contains(r.Output, "ended (oom_killed, exit code 137)") {
		t.Errorf("job_output: %q", r.Output)
	}
	if r := results["alive"]; r.Status != wire.StatusExited || !strings.Contains(r.Output, "still here") {
		t.Errorf("the command after: %+v", r)
	}
	msgs, all := e.lastChat()
	if !said(msgs, "tool", want) {
		t.Errorf("the model was not told it ran out of memory: %s", all)
	}
	if _, d := s.turn("hello again"); d.Reason != wire.ReasonStop {
		t.Errorf("the next turn ended with %q", d.Reason)
	}
}
