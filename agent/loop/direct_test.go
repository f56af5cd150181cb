package loop_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
)

// A Direct call of one of the loop's own tools does not ask TurnTools
// (the agent would ask its bridge for the host tools on every run_tool);
// one of a turn tool, or an unknown name, does, and finds it or lists
// every name.
func TestDirectAsksTurnToolsOnlyForTheirTools(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	extra := echoTool()
	extra.name = "host_echo"
	l := loop.New(loop.Config{Model: &fakeModel{}, Tools: []tools.Tool{echoTool()},
		TurnTools: func(context.Context) []tools.Tool { asked.Add(1); return []tools.Tool{extra} }})
	run := func(name string) tools.Result {
		rec := &recorder{}
		return l.Direct(context.Background(), loop.ToolCall{ID: "run_1", Name: name, Arguments: `{"text":"hi"}`}, rec.emit)
	}
	if res := run("echo"); res.Err != "" || asked.Load() != 0 {
		t.Fatalf("built-in echo: %+v, TurnTools asked %d times; want a result without asking", res, asked.Load())
	}
	if res := run("host_echo"); res.Err != "" || asked.Load() != 1 {
		t.Fatalf("turn tool host_echo: %+v, TurnTools asked %d times; want 1", res, asked.Load())
	}
	res := run("nope")
	if res.Err == "" || asked.Load() != 2 {
		t.Fatalf("unknown tool: %+v, TurnTools asked %d times; want an error after asking", res, asked.Load())
	}
	for _, name := range []string{"echo", "host_echo"} {
		if !strings.Contains(res.Err, name) {
			t.Errorf("the unknown tool's error %q does not list %s", res.Err, name)
		}
	}
}
