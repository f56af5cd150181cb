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
{"when":"sigkill","steps":[
  {"tool_calls":[
    {"id":"self","name":"execute","arguments":{"command":"echo self; kill -9 $$"}}]},
  {"tool_calls":[
    {"id":"stubborn","name":"execute","arguments":{"command":"trap '' HUP TERM; sleep 300","background":true}}]},
  {"tool_calls":[
    {"id":"jobkill","name":"job_kill","arguments":{"id":"j6"}}]},
  {"content":"Killed."}
]},
{"steps":[{"content":"I only know scripted answers."}]}]}`

// TestCommandOutOfMemory: a command the kernel's OOM killer ends inside a
// sandbox with a small memory limit comes back as oom_killed, exit 137,
// with an error naming the limit — in the foreground and, once it ended,
// as a background job in job_output —, the model reads it, and the turn
// and the sandbox go on; a SIGKILL that is not the OOM killer's is not
// reported as one.
func TestCommandOutOfMemory(t *testing.T) {
	e := newEnv(t, oomScript)
	e.startBridge("BOXWIRE_MEMORY_BYTES=" + strconv.Itoa(oomMemory))
	s := e.dial("")
	events, done := s.turn("hog memory")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	got := map[string]wire.ToolResult{}
	for _, ev := range events {
		switch ev.Type {
		case wire.TypeToolResult:
			var r wire.ToolResult
			mustDecode(t, ev, &r)
			got[r.CallID] = r
		case wire.TypeSandboxExited:
			t.Fatalf("the sandbox stopped: %s", ev.Data)
		}
	}
	const want = "killed for running out of memory: the sandbox's limit is 128 MiB"
	for _, id := range []string{"hog", "out"} {
		r := got[id]
		t.Logf("%s: status %q, exit %d, error %q", id, r.Status, exitCode(r), r.Error)
		if r.Status != wire.StatusOOMKilled || exitCode(r) != 137 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: result %+v, want oom_killed, exit 137, error saying %q", id, r, want)
		}
	}
	if r := got["hog"]; !strings.Contains(r.Output, "allocating") {
		t.Errorf("hog: output %q lacks the command's", r.Output)
	}
	if r := got["out"]; !strings.Contains(r.Output, "ended (oom_killed, exit code 137)") {
		t.Errorf("job_output: %q", r.Output)
	}
	if r := got["alive"]; r.Status != wire.StatusExited || !strings.Contains(r.Output, "still here") {
		t.Errorf("the command after: %+v", r)
	}
	msgs, all := e.lastChat()
	if !said(msgs, "tool", want) {
		t.Errorf("the model was not told it ran out of memory: %s", all)
	}
	if _, d := s.turn("hello again"); d.Reason != wire.ReasonStop {
		t.Errorf("the next turn ended with %q", d.Reason)
	}

	// A SIGKILL that is not the OOM killer's, in the sandbox whose cgroup
	// has counted the two kills above: a command's own kill -9 is exit 137,
	// and job_kill of a job that ignores SIGTERM (so it ends by SIGKILL)
	// is killed.
	events, done = s.turn("sigkill")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("the sigkill turn ended with %q", done.Reason)
	}
	killed := results(t, events)
	for _, id := range []string{"self", "jobkill"} {
		t.Logf("%s: status %q, exit %d, error %q", id, killed[id].Status, exitCode(killed[id]), killed[id].Error)
	}
	if r := killed["self"]; r.Status != wire.StatusExited || exitCode(r) != 137 || r.Error != "" || !strings.Contains(r.Output, "self") {
		t.Errorf("kill -9 $$: %+v, want exited 137 without an error", r)
	}
	if r := killed["jobkill"]; r.Status != wire.StatusKilled || exitCode(r) != 137 || strings.Contains(r.Error, "memory") {
		t.Errorf("job_kill: %+v, want killed, exit 137, no word of memory", r)
	}
}
