package execute_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeCgroup writes a memory cgroup's files into a new directory: files
// maps names to contents. It returns the directory.
func fakeCgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// oomCommand counts an OOM kill in the fake cgroup's file events, as the
// kernel would, and then ends as end says (kill -9 $$: the shell dies of
// SIGKILL, as an OOM victim does).
func oomCommand(dir, events, count, end string) string {
	return fmt.Sprintf(`echo started; printf 'oom %s\noom_kill %s\n' > %s; %s`,
		count, count, filepath.Join(dir, events), end)
}

// TestExecuteOOMKilled runs commands against a fake memory cgroup: only a
// command that dies of SIGKILL while the cgroup's OOM kill count grows is
// oom_killed, with an error naming the limit when it has one.
func TestExecuteOOMKilled(t *testing.T) {
	v2 := map[string]string{"memory.events": "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n", "memory.max": "134217728\n"}
	tests := []struct {
		name     string
		files    map[string]string
		events   string // the file the command counts the kill in
		count    string // the count it writes
		end      string
		status   string
		code     int
		errHas   string // "" means no error
		errLacks string
	}{
		{"v2 killed", v2, "memory.events", "1", "kill -9 $$", wire.StatusOOMKilled, 137,
			"killed for running out of memory: the sandbox's limit is 128 MiB", ""},
		{"v2 shell survived, exit 137", v2, "memory.events", "2", "(exit 137)", wire.StatusOOMKilled, 137,
			"killed for running out of memory", ""},
		{"v2 no new kill", v2, "memory.events", "0", "kill -9 $$", wire.StatusExited, 137, "", ""},
		{"v2 new kill, not SIGKILL", v2, "memory.events", "1", "exit 1", wire.StatusExited, 1, "", ""},
		{"v2 no limit", map[string]string{"memory.events": "oom_kill 4\n", "memory.max": "max\n"}, "memory.events", "5", "kill -9 $$",
			wire.StatusOOMKilled, 137, "killed for running out of memory: the kernel's OOM killer ended it (the sandbox has no memory limit", "MiB"},
		{"v2 odd limit", map[string]string{"memory.events": "oom_kill 0\n", "memory.max": "100000000\n"}, "memory.events", "1", "kill -9 $$",
			wire.StatusOOMKilled, 137, "the sandbox's limit is 95.4 MiB", ""},
		{"v1", map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", "memory.limit_in_bytes": "268435456\n"},
			"memory.oom_control", "8", "kill -9 $$", wire.StatusOOMKilled, 137, "the sandbox's limit is 256 MiB", ""},
		{"v1 unlimited", map[string]string{"memory.oom_control": "oom_kill 0\n", "memory.limit_in_bytes": "9223372036854771712\n"},
			"memory.oom_control", "1", "kill -9 $$", wire.StatusOOMKilled, 137, "no memory limit of its own", "MiB"},
		{"no cgroup files", map[string]string{}, "memory.events", "1", "kill -9 $$", wire.StatusExited, 137, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fakeCgroup(t, tt.files)
			r, _ := newRunner(t, execute.Config{MemoryCgroup: dir})
			res := call(t, r, "execute", map[string]any{"command": oomCommand(dir, tt.events, tt.count, tt.end)})
			if res.Status != tt.status || res.ExitCode == nil || *res.ExitCode != tt.code {
				t.Fatalf("result %+v, want status %s, exit code %d", res, tt.status, tt.code)
			}
			if tt.errHas == "" && res.Err != "" || !strings.Contains(res.Err, tt.errHas) ||
				tt.errLacks != "" && strings.Contains(res.Err, tt.errLacks) {
				t.Errorf("error %q, want one with %q (and without %q)", res.Err, tt.errHas, tt.errLacks)
			}
			if !strings.Contains(res.Output, "started") {
				t.Errorf("output %q lacks the command's", res.Output)
			}
		})
	}
}

// TestExecuteOOMKilledOff: with NoMemoryCgroup a SIGKILL is an exit code.
func TestExecuteOOMKilledOff(t *testing.T) {
	r, _ := newRunner(t, execute.Config{MemoryCgroup: execute.NoMemoryCgroup})
	res := call(t, r, "execute", map[string]any{"command": "kill -9 $$"})
	if res.Status != wire.StatusExited || res.ExitCode == nil || *res.ExitCode != 137 || res.Err != "" {
		t.Errorf("result %+v, want exited 137", res)
	}
}

// TestExecuteOOMKilledKeepsShell: an OOM-killed command's cd is not
// remembered, as for any command that was killed.
func TestExecuteOOMKilledKeepsShell(t *testing.T) {
	dir := fakeCgroup(t, map[string]string{"memory.events": "oom_kill 0\n", "memory.max": "max\n"})
	r, ws := newRunner(t, execute.Config{MemoryCgroup: dir})
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := call(t, r, "execute", map[string]any{"command": oomCommand(dir, "memory.events", "1", "cd sub; (exit 137)")})
	if res.Status != wire.StatusOOMKilled {
		t.Fatalf("result %+v, want oom_killed", res)
	}
	next := call(t, r, "execute", map[string]any{"command": "pwd"})
	if got, want := strings.TrimSpace(next.Output), ws; !strings.HasSuffix(got, want) || strings.HasSuffix(got, "sub") {
		t.Errorf("next command ran in %q, want the workspace %s", got, want)
	}
}

// TestJobOOMKilled: a background job the OOM killer ends says so in
// job_output and jobs once it ended.
func TestJobOOMKilled(t *testing.T) {
	dir := fakeCgroup(t, map[string]string{"memory.events": "oom_kill 2\n", "memory.max": "67108864\n"})
	r, _ := newRunner(t, execute.Config{MemoryCgroup: dir})
	res := call(t, r, "execute", map[string]any{"background": true,
		"command": oomCommand(dir, "memory.events", "3", "sleep 0.3; kill -9 $$")})
	if res.Status != wire.StatusBackground || res.JobID == "" {
		t.Fatalf("result %+v", res)
	}
	var out tool.Result
	testutil.Eventually(t, "the job ending", callLimit, func() bool {
		out = call(t, r, "job_output", map[string]any{"id": res.JobID})
		return out.Status != wire.StatusBackground
	})
	if out.Status != wire.StatusOOMKilled || out.ExitCode == nil || *out.ExitCode != 137 ||
		!strings.Contains(out.Err, "killed for running out of memory: the sandbox's limit is 64 MiB") {
		t.Fatalf("job_output %+v, want oom_killed with the limit", out)
	}
	if !strings.Contains(out.Output, "ended (oom_killed, exit code 137)") {
		t.Errorf("job_output says %q", out.Output)
	}
	list := call(t, r, "jobs", nil)
	if !strings.Contains(list.Output, res.JobID+"\tended (oom_killed, exit code 137)") {
		t.Errorf("jobs says %q", list.Output)
	}
}

// TestCgroupPaths reads the paths the agent looks under /sys/fs/cgroup for.
func TestCgroupPaths(t *testing.T) {
	tests := []struct{ name, file, v2, v1 string }{
		{"v2 namespace", "0::/\n", "/", "/"},
		{"v2 host", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-2f.scope\n", "/kubepods.slice/kubepods-pod1.slice/cri-containerd-2f.scope", "/"},
		{"hybrid", "5:devices:/docker/ab\n4:memory:/docker/ab\n1:name=systemd:/docker/ab\n0::/\n", "/", "/docker/ab"},
		{"v1 joined", "3:cpu,memory:/x\n", "/", "/x"},
		{"none", "", "/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cgroup")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			if v2, v1 := execute.CgroupPaths(path); v2 != tt.v2 || v1 != tt.v1 {
				t.Errorf("got %q, %q; want %q, %q", v2, v1, tt.v2, tt.v1)
			}
		})
	}
}

// TestStoppedCommandNotOOMKilled: a command that execute or job_kill
// stopped keeps that status although it died of SIGKILL while the cgroup
// counted an OOM kill (it ignores SIGHUP and SIGTERM, so only the SIGKILL
// after the grace period ends it).
func TestStoppedCommandNotOOMKilled(t *testing.T) {
	const end = "trap '' HUP TERM; sleep 30"
	tests := []struct {
		name   string
		status string
		stop   func(t *testing.T, r *execute.Runner, command, counted string) tool.Result
	}{
		{"timed out", wire.StatusTimedOut, func(t *testing.T, r *execute.Runner, command, _ string) tool.Result {
			return call(t, r, "execute", map[string]any{"command": command, "timeout": 1})
		}},
		{"interrupted", wire.StatusInterrupted, func(t *testing.T, r *execute.Runner, command, counted string) tool.Result {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped := make(chan struct{})
			go func() { // cancels once the kill is counted, or after callLimit/2: the test then fails on the count
				defer close(stopped)
				defer cancel()
				for end := time.Now().Add(callLimit / 2); time.Now().Before(end) && !counts(counted); {
					time.Sleep(10 * time.Millisecond)
				}
			}()
			defer func() { <-stopped }()
			return callWith(t, ctx, r, tool.Call{ID: "c1"}, "execute", map[string]any{"command": command})
		}},
		{"job_kill", wire.StatusKilled, func(t *testing.T, r *execute.Runner, command, counted string) tool.Result {
			bg := call(t, r, "execute", map[string]any{"command": command, "background": true})
			if bg.Status != wire.StatusBackground {
				t.Fatalf("result %+v", bg)
			}
			waitCounted(t, counted)
			return call(t, r, "job_kill", map[string]any{"id": bg.JobID})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fakeCgroup(t, map[string]string{"memory.events": "oom_kill 0\n", "memory.max": "134217728\n"})
			r, _ := newRunner(t, execute.Config{MemoryCgroup: dir, KillGrace: 100 * time.Millisecond})
			res := tt.stop(t, r, oomCommand(dir, "memory.events", "1", end), filepath.Join(dir, "memory.events"))
			if got := readFile(t, filepath.Join(dir, "memory.events")); !strings.Contains(got, "oom_kill 1") {
				t.Fatalf("the command did not count the kill: %q", got)
			}
			if res.Status != tt.status || res.ExitCode == nil || *res.ExitCode != 137 || strings.Contains(res.Err, "memory") {
				t.Errorf("result %+v, want %s, exit code 137, no word of memory", res, tt.status)
			}
		})
	}
}

// waitCounted waits until the fake cgroup's events file counts a kill.
func waitCounted(t *testing.T, events string) {
	t.Helper()
	testutil.Eventually(t, "the command counting a kill", callLimit, func() bool { return counts(events) })
}

// counts says whether the fake cgroup's events file counts a kill.
func counts(events string) bool {
	data, err := os.ReadFile(events)
	return err == nil && strings.Contains(string(data), "oom_kill 1")
}
