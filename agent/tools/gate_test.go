package tools_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/tools"
)

// File tools are gated: never more than MaxBlockingCalls run at once (each
// blocks an OS thread in the kernel), the others wait their turn, and a
// call whose context ends while it waits returns without running.
func TestFileToolsGated(t *testing.T) {
	s := tools.New(tools.Config{Workspace: t.TempDir()})
	defer s.Close()
	var running, most atomic.Int32
	release := make(chan struct{})
	tool := tools.Gate(s, "read_file", tools.MaxBlockingCalls, func(tools.Call) tools.Result {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		return tools.Result{Output: "ok"}
	})
	var wg sync.WaitGroup
	for range 3 * tools.MaxBlockingCalls {
		wg.Go(func() {
			if r := tool.Run(context.Background(), tools.Call{}); r.Output != "ok" {
				t.Errorf("result %+v", r)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < tools.MaxBlockingCalls && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a call past the gate would show now

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := tool.Run(ctx, tools.Call{}); r.Err == "" || r.Output != "" {
		t.Errorf("a call cancelled while waiting: %+v, want an error and no run", r)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != tools.MaxBlockingCalls {
		t.Fatalf("%d calls ran at once, want %d", m, tools.MaxBlockingCalls)
	}
}

// The gate is in front of every file tool, and not in front of execute
// (whose commands are awaited without a thread) or the job tools.
func TestWhichToolsAreGated(t *testing.T) {
	s := tools.New(tools.Config{Workspace: t.TempDir()})
	defer s.Close()
	gated := map[string]bool{}
	for _, name := range tools.GatedNames(s) {
		gated[name] = true
	}
	for _, tool := range s.All() {
		want := map[string]bool{"read_file": true, "write_file": true, "edit_file": true, "delete": true,
			"ls": true, "glob": true, "grep": true}[tool.Name()]
		if gated[tool.Name()] != want {
			t.Errorf("%s gated = %v, want %v", tool.Name(), gated[tool.Name()], want)
		}
	}
}
