package e2e_test

import (
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// toolsScript drives every tool once in a single turn. Job ids are
// deterministic: every execute call takes the next one (j1, j2, ...).
const toolsScript = `{"turns":[{"when":"tools","steps":[
  {"content":"Writing, listing, reading.","tool_calls":[
    {"id":"write","name":"write_file","arguments":{"path":"src/app.py","content":"print('hello')\nprint('hello')\n"}},
    {"id":"ls","name":"ls","arguments":{"path":"src"}},
    {"id":"read","name":"read_file","arguments":{"path":"src/app.py"}}]},
  {"tool_calls":[
    {"id":"edit","name":"edit_file","arguments":{"path":"src/app.py","old":"hello","new":"bye","replace_all":true}},
    {"id":"glob","name":"glob","arguments":{"pattern":"*.py"}},
    {"id":"grep","name":"grep","arguments":{"pattern":"bye","mode":"content"}}]},
  {"tool_calls":[
    {"id":"exec","name":"execute","arguments":{"command":"python3 src/app.py; seq 1 20000 | tail -n 1"}},
    {"id":"bg","name":"execute","arguments":{"command":"echo server up; exec sleep 1000","background":true}}]},
  {"tool_calls":[
    {"id":"out","name":"job_output","arguments":{"id":"j2"}},
    {"id":"jobs","name":"jobs","arguments":{}},
    {"id":"write_job","name":"job_write","arguments":{"id":"j2","input":"x\n"}},
    {"id":"kill","name":"job_kill","arguments":{"id":"j2"}}]},
  {"tool_calls":[
    {"id":"ask","name":"execute","arguments":{"command":"read -p 'Name: ' n </dev/tty; echo \"hi $n\""}}]},
  {"tool_calls":[
    {"id":"answer","name":"job_write","arguments":{"id":"j3","input":"bob\n"}},
    {"id":"big","name":"execute","arguments":{"command":"seq 1 100000"}},
    {"id":"del","name":"delete","arguments":{"path":"src","recursive":true}}]},
  {"content":"All tools ran."}
]}]}`

func TestEveryToolInSandbox(t *testing.T) {
	e := newEnv(t, toolsScript)
	e.startBridge()
	s := e.dial("")
	events, done := s.turn("run the tools")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	results := map[string]wire.ToolResult{}
	for _, ev := range events {
		if ev.Type == wire.TypeToolResult {
			var r wire.ToolResult
			mustDecode(t, ev, &r)
			results[r.CallID] = r
		}
	}
	check := func(id string, ok func(r wire.ToolResult) bool) {
		t.Helper()
		r, found := results[id]
		if !found {
			t.Errorf("%s: no tool_result", id)
			return
		}
		if !ok(r) {
			t.Errorf("%s: unexpected result %+v", id, r)
		}
	}
	has := func(r wire.ToolResult, s string) bool { return r.Error == "" && strings.Contains(r.Output, s) }
	check("write", func(r wire.ToolResult) bool { return has(r, "created src/app.py") })
	check("ls", func(r wire.ToolResult) bool { return has(r, "app.py") })
	check("read", func(r wire.ToolResult) bool { return has(r, "1\tprint('hello')\n2\tprint('hello')") })
	check("edit", func(r wire.ToolResult) bool { return has(r, "replaced 2 occurrences") })
	check("glob", func(r wire.ToolResult) bool { return has(r, "src/app.py\n[1 paths]") })
	check("grep", func(r wire.ToolResult) bool { return has(r, "src/app.py:1: print('bye')") })
	check("exec", func(r wire.ToolResult) bool {
		return has(r, "bye\nbye\n20000\n") && r.Status == wire.StatusExited && r.ExitCode != nil && *r.ExitCode == 0
	})
	check("bg", func(r wire.ToolResult) bool { return r.Status == wire.StatusBackground && r.JobID == "j2" })
	check("out", func(r wire.ToolResult) bool { return r.JobID == "j2" && r.Error == "" })
	check("jobs", func(r wire.ToolResult) bool { return has(r, "j2\tis running") })
	check("write_job", func(r wire.ToolResult) bool { return has(r, "wrote 2 bytes to job j2") })
	check("kill", func(r wire.ToolResult) bool { return has(r, "killed job j2") && r.Status == "killed" })
	check("ask", func(r wire.ToolResult) bool {
		return r.Status == wire.StatusAwaitingInput && r.JobID == "j3" && strings.Contains(r.Output, "Name: ")
	})
	check("answer", func(r wire.ToolResult) bool { return has(r, "hi bob") })
	check("big", func(r wire.ToolResult) bool {
		return r.Truncated && r.TotalLines == 100000 && strings.HasPrefix(r.OutputPath, "/tmp/boxwire/output/") &&
			strings.HasSuffix(r.Output, "99999\n100000\n")
	})
	check("del", func(r wire.ToolResult) bool { return has(r, "deleted directory src") })

	// Nothing of the jobs is left running in the sandbox.
	boxes := e.containers(map[string]string{"boxwire.thread": s.conn.Thread()})
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes", len(boxes))
	}
	if ps := dockerExec(t, boxes[0].ID, "ps", "-eo", "args"); strings.Contains(ps, "sleep 1000") {
		t.Errorf("the killed job is still running:\n%s", ps)
	}
	// The full output of the big command is in the sandbox.
	if n := dockerExec(t, boxes[0].ID, "wc", "-l", results["big"].OutputPath); !strings.HasPrefix(n, "100000 ") {
		t.Errorf("full output file: %q", n)
	}
}
