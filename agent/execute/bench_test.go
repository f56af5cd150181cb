package execute_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/agent/tool/tooltest"
)

// BenchmarkExecuteTrue times `execute true` from the call to its result,
// as the bench's execute_breakdown does in the sandbox: each command is
// paced (untimed) until the spare shells are back and the next one waits
// for its command, so it runs on a spare, in the remembered shell unless
// fresh.
func BenchmarkExecuteTrue(b *testing.B) {
	for _, bc := range []struct {
		name string
		args map[string]any
	}{
		{"remembered", map[string]any{"command": "true"}},
		{"fresh", map[string]any{"command": "true", "fresh": true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ws, home := tooltest.Workspace(b)
			r := execute.New(execute.Config{Workspace: ws, OutputDir: b.TempDir(), Env: []string{home}})
			b.Cleanup(r.Close)
			var ex tool.Tool
			for _, tl := range r.Tools() {
				if tl.Name() == "execute" {
					ex = tl
				}
			}
			raw, err := json.Marshal(bc.args)
			if err != nil {
				b.Fatal(err)
			}
			run := func() {
				res := ex.Run(context.Background(), tool.Call{ID: "b", Args: raw})
				if res.ExitCode == nil || *res.ExitCode != 0 {
					b.Fatalf("execute true: %+v", res)
				}
			}
			run() // the first command starts the spares
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				awaitSpare(b, r)
				b.StartTimer()
				start := time.Now()
				run()
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns/op")
		})
	}
}

// awaitSpare waits (untimed) until the spare the next command takes has
// read its login files and waits for its command on the pipe.
func awaitSpare(b *testing.B, r *execute.Runner) {
	b.Helper()
	pid := execute.SparePID(r, tooltest.CallLimit)
	if pid == 0 {
		b.Fatal("no spare shell")
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	for deadline := time.Now().Add(tooltest.CallLimit); ; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("spare shell %d never waited for its command", pid)
		}
		sc, _ := os.ReadFile(filepath.Join(proc, "syscall"))
		// read(2) (amd64 0, arm64 63) of the pipe, dup'ed to fd 0 by <&3
		f := strings.Fields(string(sc))
		if len(f) > 1 && (f[0] == "0" || f[0] == "63") && f[1] == "0x0" {
			if in, _ := os.Readlink(filepath.Join(proc, "fd", "0")); strings.HasPrefix(in, "pipe:") {
				return
			}
		}
	}
}
