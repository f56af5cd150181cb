// Package tooltest helps the tools' tests: a fresh workspace and a bounded
// call of a tool. It imports nothing of ours but agent/tool (the agent
// shares only bridge/wire with the bridge, tests included in go list's
// view).
package tooltest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/tool"
)

// CallLimit bounds every tool call a test makes.
const CallLimit = 20 * time.Second

// Workspace returns a fresh workspace folder, its symlinks resolved, and
// the environment entry of a fresh HOME for commands: they run as login
// shells, and a HOME of their own keeps the host's profile (whatever it
// runs) from changing or stalling the tests.
func Workspace(t testing.TB) (ws, home string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws, "HOME=" + t.TempDir()
}

// Run runs tl as call c with args (marshalled unless already a
// json.RawMessage) and fails the test if it does not return within
// CallLimit.
func Run(t testing.TB, ctx context.Context, tl tool.Tool, c tool.Call, args any) tool.Result {
	t.Helper()
	raw, isRaw := args.(json.RawMessage)
	if !isRaw {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			t.Fatal(err)
		}
	}
	c.Args = raw
	done := make(chan tool.Result, 1)
	go func() { done <- tl.Run(ctx, c) }() // left running when it is late: the test has failed
	select {
	case res := <-done:
		return res
	case <-time.After(CallLimit):
		t.Fatalf("%s: no result within %v", tl.Name(), CallLimit)
		return tool.Result{}
	}
}
