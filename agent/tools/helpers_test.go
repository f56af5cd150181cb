package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// callLimit bounds every tool call a test makes.
const callLimit = 20 * time.Second

// newSet returns tools working in a fresh workspace, and its path.
func newSet(t *testing.T, cfg tools.Config) (*tools.Set, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = ws
	if cfg.OutputDir == "" {
		cfg.OutputDir = t.TempDir()
	}
	// Commands run as login shells: give them a HOME of their own, so the
	// host's profile (whatever it runs) cannot change or stall the tests.
	// A test's own HOME in cfg.Env comes later and wins.
	cfg.Env = append([]string{"HOME=" + t.TempDir()}, cfg.Env...)
	set := tools.New(cfg)
	t.Cleanup(func() { _ = set.Close() })
	return set, ws
}

// call runs the named tool with args (marshalled unless already raw) and
// fails the test if it does not return within callLimit.
func call(t *testing.T, set *tools.Set, name string, args any) tools.Result {
	t.Helper()
	return callWith(t, context.Background(), set, tools.Call{ID: "c1"}, name, args)
}

func callWith(t *testing.T, ctx context.Context, set *tools.Set, c tools.Call, name string, args any) tools.Result {
	t.Helper()
	tool, ok := set.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	raw, isRaw := args.(json.RawMessage)
	if !isRaw {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			t.Fatal(err)
		}
	}
	c.Args = raw
	return testutil.Within(t, name, callLimit, func() tools.Result { return tool.Run(ctx, c) })
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
