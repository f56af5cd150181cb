package mcptools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/mcptools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestForThread: the servers a thread declares are started beside the
// image's with the same environment and offered; one named like an
// image's server, one that does not check and a second of one name are
// left out; the same declaration keeps its servers, an empty one ends
// them; more threads than MaxThreadSets still get theirs.
func TestForThread(t *testing.T) {
	s := servers(t, fmt.Sprintf(`{"servers":[{"name":"img","command":[%q],"prefix":"img_","tools":["echo"]}]}`, mcptool))
	decl := []wire.MCPServer{
		{Name: "thr", Command: []string{mcptool, "--name", "thread"}, Prefix: "thr_", Tools: []string{"echo", "canary"},
			Env: map[string]string{"MCPTOOL_CANARY": "from-the-thread"}},
		{Name: "img", Command: []string{"/nonexistent/mcp"}, Prefix: "clash_"},
		{Name: "broken", Prefix: "broken_"},
		{Name: "thr", Command: []string{mcptool}, Prefix: "again_"},
	}
	ctx := context.Background()
	ts := byName(s.ForThread(ctx, "t_1", decl))
	if len(ts) != 2 || ts["thr_echo"] == nil || ts["thr_canary"] == nil {
		t.Fatalf("the thread's tools: %v", ts)
	}
	if r := run(ts["thr_echo"], ctx, `{"text":"hi"}`); r.Output != "echo: hi" {
		t.Errorf("thr_echo: %+v", r)
	}
	if r := run(ts["thr_canary"], ctx, `{}`); r.Output != "the secret is from-the-thread" {
		t.Errorf("the thread server's environment: %+v", r)
	}
	if img := byName(s.Tools(ctx)); len(img) != 1 || img["img_echo"] == nil {
		t.Errorf("the image's tools: %v", img)
	}
	if other := s.ForThread(ctx, "t_2", nil); len(other) != 0 {
		t.Errorf("a thread that declares none got %v", other)
	}
	again := byName(s.ForThread(ctx, "t_1", decl))
	if r := run(again["thr_echo"], ctx, `{"text":"again"}`); r.Output != "echo: again" {
		t.Errorf("the same declaration again: %+v", r)
	}
	if ts := s.ForThread(ctx, "t_1", nil); len(ts) != 0 {
		t.Errorf("an empty declaration kept %v", ts)
	}
	if r := run(ts["thr_echo"], ctx, `{"text":"gone"}`); !strings.Contains(r.Err, "the thread's MCP servers were ended") {
		t.Errorf("a tool of ended servers still answered: %+v", r)
	}
	one := decl[:1]
	for i := range mcptools.MaxThreadSets + 2 {
		if ts := s.ForThread(ctx, fmt.Sprintf("t_%d", 10+i), one); len(ts) != 2 {
			t.Fatalf("thread %d of %d: %v", i+1, mcptools.MaxThreadSets+2, ts)
		}
	}
	if ts := s.ForThread(ctx, "t_10", one); len(ts) != 2 { // ended, started again
		t.Errorf("the first of many threads again: %v", ts)
	}
}
