package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/agent/tool/tooltest"
	"github.com/boxwire/boxwire/agent/tools"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSet returns tools working in a fresh workspace, and its path.
func newSet(t *testing.T, cfg tools.Config) (*tools.Set, string) {
	t.Helper()
	ws, home := tooltest.Workspace(t)
	cfg.Workspace = ws
	if cfg.OutputDir == "" {
		cfg.OutputDir = t.TempDir()
	}
	cfg.Env = append([]string{home}, cfg.Env...) // a test's own HOME comes later and wins
	set := tools.New(cfg)
	t.Cleanup(func() { _ = set.Close() })
	return set, ws
}

// call runs the named tool with args (marshalled unless already raw) and
// fails the test if it does not return within tooltest.CallLimit.
func call(t *testing.T, set *tools.Set, name string, args any) tools.Result {
	t.Helper()
	return callWith(t, context.Background(), set, tools.Call{ID: "c1"}, name, args)
}

func callWith(t *testing.T, ctx context.Context, set *tools.Set, c tools.Call, name string, args any) tools.Result {
	t.Helper()
	named, ok := set.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	return tooltest.Run(t, ctx, named, c, args)
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
