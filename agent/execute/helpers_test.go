package execute_test

import (
	"context"
	"os"
	"testing"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/agent/tool/tooltest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// callLimit bounds every tool call a test makes.
const callLimit = tooltest.CallLimit

// newRunner returns command tools working in a fresh workspace, and its
// path.
func newRunner(t *testing.T, cfg execute.Config) (*execute.Runner, string) {
	t.Helper()
	ws, home := tooltest.Workspace(t)
	cfg.Workspace = ws
	if cfg.OutputDir == "" {
		cfg.OutputDir = t.TempDir()
	}
	cfg.Env = append([]string{home}, cfg.Env...) // a test's own HOME comes later and wins
	r := execute.New(cfg)
	t.Cleanup(r.Close)
	return r, ws
}

// call runs the named tool with args (marshalled unless already raw) and
// fails the test if it does not return within callLimit.
func call(t *testing.T, r *execute.Runner, name string, args any) tool.Result {
	t.Helper()
	return callWith(t, context.Background(), r, tool.Call{ID: "c1"}, name, args)
}

func callWith(t *testing.T, ctx context.Context, r *execute.Runner, c tool.Call, name string, args any) tool.Result {
	t.Helper()
	return tooltest.Run(t, ctx, lookup(t, r, name), c, args)
}

// lookup returns r's tool called name.
func lookup(t *testing.T, r *execute.Runner, name string) tool.Tool {
	t.Helper()
	for _, tl := range r.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
