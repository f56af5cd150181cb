package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// pidsHeld: a command takes every pid of the sandbox and keeps them for a
// few seconds while file tools and another command are called at once.
// The agent must answer all of them — a file tool blocks an OS thread,
// and a runtime that cannot start a thread dies — so the agent keeps a
// reserve of threads, awaits commands without one and gates file tools.
func pidsHeld(t *testing.T, s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	send := func(id, name string, args any) {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.conn.Send(ctx, wire.MustNew(wire.TypeRunTool, s.conn.Thread(), id, wire.RunTool{Name: name, Arguments: raw})); err != nil {
			t.Fatalf("send %s: %v", name, err)
		}
	}
	s.runTool("write_file", map[string]any{"path": "/workspace/pids.txt", "content": "a line\n"}, turnTimeout)
	send("hold", "execute", map[string]any{"timeout": 60, "command": `python3 -c '
import os, time
kids = []
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(6)
        os._exit(0)
    kids.append(pid)
print("holding", len(kids), "pids")
for p in kids:
    os.waitpid(p, 0)
'`})
	// The command prints "holding" once a fork failed: every pid is taken
	// then, for a few seconds. The calls go in only now.
	results := map[string]wire.ToolResult{}
	var held strings.Builder
	for !strings.Contains(held.String(), "holding") {
		ev := nextPidsEvent(ctx, t, s, results)
		var out wire.ToolOutput
		if ev.Type == wire.TypeToolOutput && ev.ID == "hold" && ev.Decode(&out) == nil {
			held.WriteString(out.Output)
		}
		if _, done := results["hold"]; done && !strings.Contains(held.String(), "holding") {
			t.Fatalf("the command holding the pids ended before it held them: %+v", results["hold"])
		}
	}
	const calls = 3 * 4
	for i := range calls {
		switch id := fmt.Sprint("c", i); i % 3 {
		case 0:
			send(id, "ls", map[string]any{"path": "/workspace"})
		case 1:
			send(id, "glob", map[string]any{"pattern": "**/*.txt"})
		case 2:
			send(id, "read_file", map[string]any{"path": "/workspace/pids.txt"})
		}
	}
	send("cmd", "execute", map[string]any{"command": "echo still here", "timeout": 30})

	for len(results) < calls+2 {
		nextPidsEvent(ctx, t, s, results)
	}
	if r := results["hold"]; !strings.Contains(r.Output, "holding") {
		t.Errorf("the command holding the pids: %+v", r)
	}
	for i := range calls {
		if r := results[fmt.Sprint("c", i)]; r.Error != "" || !strings.Contains(r.Output, "pids.txt") && !strings.Contains(r.Output, "a line") {
			t.Errorf("file tool call %d while the pids were held: %+v", i, r)
		}
	}
	// The command may find no pid for its shell (a clear error) or run on a
	// spare shell started earlier; either way it is answered.
	r := results["cmd"]
	if !strings.Contains(r.Output, "still here") && !strings.Contains(strings.ToLower(r.Error+r.Output), "resource temporarily unavailable") {
		t.Errorf("a command while the pids were held: %+v", r)
	}
	t.Logf("command while the pids were held: status %s err %q output %q", r.Status, r.Error, r.Output)
}

// nextPidsEvent returns s's next event, recording a tool_result in results
// by id; it fails t when the agent died, the connection ended or ctx did.
func nextPidsEvent(ctx context.Context, t *testing.T, s *session, results map[string]wire.ToolResult) wire.Envelope {
	t.Helper()
	select {
	case ev, ok := <-s.conn.Events():
		if !ok {
			t.Fatalf("connection ended: %v", s.conn.Err())
		}
		switch ev.Type {
		case wire.TypeSandboxExited, wire.TypeSandboxReplaced:
			t.Fatalf("the agent died while the pids were held: %s %s", ev.Type, ev.Data)
		case wire.TypeToolResult:
			var r wire.ToolResult
			if err := ev.Decode(&r); err != nil {
				t.Fatal(err)
			}
			results[ev.ID] = r
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("%d results before the deadline: %v", len(results), results)
	}
	return wire.Envelope{}
}
