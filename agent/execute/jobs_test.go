package execute_test

import (
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

func TestExecuteEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("BOXWIRE_TOKEN", "tok-secret")
	set, _ := newRunner(t, execute.Config{Env: []string{"HTTP_PROXY=http://127.0.0.1:3128", "PAGER=less"}})
	tests := []struct{ name, command, want string }{
		{"secrets are not inherited", `echo "[$OPENAI_API_KEY][$BOXWIRE_TOKEN]"`, "[][]\n"},
		{"extra env", `echo "$HTTP_PROXY"`, "http://127.0.0.1:3128\n"},
		{"extra env wins", `echo "$PAGER"`, "less\n"},
		{"defaults", `echo "$NO_COLOR $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND $GIT_PAGER"`, "1 0 noninteractive cat\n"},
		{"home and path", `test -n "$HOME" && command -v bash >/dev/null && echo ok`, "ok\n"},
		{"oom score", `cat /proc/self/oom_score_adj`, "1000\n"},
		{"no core dumps", `ulimit -c`, "0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, set, "execute", map[string]any{"command": tt.command})
			if res.Err != "" || res.Output != tt.want {
				t.Errorf("got %q (err %q), want %q", res.Output, res.Err, tt.want)
			}
		})
	}
}

func TestExecuteTimeoutAboveMaximum(t *testing.T) {
	set, _ := newRunner(t, execute.Config{MaxExecTimeout: time.Minute})
	res := call(t, set, "execute", map[string]any{"command": "true", "timeout": 61})
	if !strings.Contains(res.Err, "above the maximum of 60s") {
		t.Errorf("Err = %q", res.Err)
	}
}

// TestAwaitingInput runs a command that reads from its terminal: it comes
// back as awaiting_input, then takes its answer through job_write.
func TestAwaitingInput(t *testing.T) {
	set, _ := newRunner(t, execute.Config{InputIdle: 300 * time.Millisecond})
	began := time.Now()
	res := call(t, set, "execute", map[string]any{
		"command": `echo starting; read -p "Name: " name </dev/tty; echo "hello $name"`,
	})
	if res.Status != wire.StatusAwaitingInput || res.JobID == "" || res.ExitCode != nil {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(res.Output, "starting\nName: ") {
		t.Errorf("output so far = %q", res.Output)
	}
	t.Logf("awaiting_input after %v", time.Since(began))

	jobs := call(t, set, "jobs", map[string]any{})
	if !strings.Contains(jobs.Output, res.JobID+"\tis running, waiting for input") {
		t.Errorf("jobs = %q", jobs.Output)
	}
	w := call(t, set, "job_write", map[string]any{"id": res.JobID, "input": "bob\n"})
	if w.Err != "" {
		t.Fatal(w.Err)
	}
	out := awaitJobEnd(t, set, res.JobID)
	if !strings.Contains(out.Output, "hello bob") || out.Status != wire.StatusExited || *out.ExitCode != 0 {
		t.Errorf("job_output = %+v", out)
	}
}

// awaitJobEnd polls job_output until the job has ended.
func awaitJobEnd(t *testing.T, set *execute.Runner, id string) tool.Result {
	t.Helper()
	return testutil.Poll(t, "job "+id+" ending", callLimit, func() (tool.Result, error) {
		res := call(t, set, "job_output", map[string]any{"id": id, "since": 0})
		if res.ExitCode == nil {
			return res, fmt.Errorf("job_output %+v", res)
		}
		return res, nil
	})
}

func TestBackgroundJob(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	res := call(t, set, "execute", map[string]any{
		"command":    `echo $$ > job.pid; for i in 1 2 3; do echo line$i; done; sleep 1000`,
		"background": true,
	})
	if res.Status != wire.StatusBackground || res.JobID == "" {
		t.Fatalf("result = %+v", res)
	}
	id := res.JobID
	deadline := time.Now().Add(callLimit)
	var out tool.Result
	for {
		out = call(t, set, "job_output", map[string]any{"id": id})
		if strings.Contains(out.Output, "line3") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(out.Output, "line1\nline2\nline3\n") || out.Status != wire.StatusBackground || out.ExitCode != nil {
		t.Fatalf("job_output = %+v", out)
	}
	since := call(t, set, "job_output", map[string]any{"id": id, "since": 6})
	if !strings.HasPrefix(since.Output, "line2\nline3\n[job "+id+" is running; bytes 6-18 of 18; next since=18]") {
		t.Errorf("job_output since 6 = %q", since.Output)
	}
	if l := call(t, set, "jobs", map[string]any{}); !strings.Contains(l.Output, id+"\tis running") {
		t.Errorf("jobs = %q", l.Output)
	}
	pid := readPid(t, filepath.Join(ws, "job.pid"))
	k := call(t, set, "job_kill", map[string]any{"id": id})
	if k.Err != "" || k.Status != "killed" || !strings.HasPrefix(k.Output, "killed job "+id) {
		t.Errorf("job_kill = %+v", k)
	}
	waitDead(t, pid)
	if w := call(t, set, "job_write", map[string]any{"id": id, "input": "x"}); !strings.Contains(w.Err, "has ended") {
		t.Errorf("job_write after kill: %q", w.Err)
	}
	for _, name := range []string{"job_output", "job_kill", "job_write"} {
		if r := call(t, set, name, map[string]any{"id": "j999", "input": "x"}); !strings.Contains(r.Err, `no background job "j999"`) {
			t.Errorf("%s of an unknown job: %q", name, r.Err)
		}
	}
}

// TestCloseKillsJobs proves that nothing a background job started is left
// running once the tools are closed (agent shutdown).
func TestCloseKillsJobs(t *testing.T) {
	ws := t.TempDir()
	set := execute.New(execute.Config{Workspace: ws, OutputDir: t.TempDir(), Env: []string{"HOME=" + t.TempDir()}})
	defer set.Close()
	res := call(t, set, "execute", map[string]any{
		"command":    `(trap '' HUP TERM; sleep 1000) & echo $! > child.pid; sleep 1000`,
		"background": true,
	})
	if res.JobID == "" {
		t.Fatalf("result = %+v", res)
	}
	testutil.Eventually(t, "the job writing its child's pid", callLimit, func() bool {
		b, err := os.ReadFile(filepath.Join(ws, "child.pid"))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	set.Close()
	waitDead(t, readPid(t, filepath.Join(ws, "child.pid")))
	if r := call(t, set, "execute", map[string]any{"command": "true"}); !strings.Contains(r.Err, "shutting down") {
		t.Errorf("execute after Close: %+v", r)
	}
}

// TestOutputDirBounded runs commands with large outputs into a small
// output directory: the oldest files go.
func TestOutputDirBounded(t *testing.T) {
	dir := t.TempDir()
	set, _ := newRunner(t, execute.Config{OutputLimit: 100, OutputDir: dir, OutputDirLimit: 50000})
	var paths []string
	for range 5 {
		res := call(t, set, "execute", map[string]any{"command": "seq 1 5000"}) // 23893 bytes
		if res.OutputPath == "" {
			t.Fatalf("no output path: %+v", res)
		}
		paths = append(paths, res.OutputPath)
	}
	var total int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, _ := e.Info()
		total += info.Size()
	}
	if total > 50000 {
		t.Errorf("output dir holds %d bytes, limit 50000", total)
	}
	if _, err := os.Stat(paths[4]); err != nil {
		t.Errorf("newest output file is gone: %v", err)
	}
	if _, err := os.Stat(paths[0]); err == nil {
		t.Error("oldest output file was kept")
	}
}

// A command's full output becomes a file only when it is kept: output the
// model sees whole leaves no file behind, longer output is in the file
// whole, and a background job has its file from the start.
func TestOutputFileOnlyWhenKept(t *testing.T) {
	dir := t.TempDir()
	set, _ := newRunner(t, execute.Config{OutputLimit: 100, OutputDir: dir})
	files := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if res := call(t, set, "execute", map[string]any{"command": "seq 1 20"}); res.OutputPath != "" || res.TotalBytes != 51 {
		t.Fatalf("short output: %+v", res)
	}
	if names := files(); len(names) != 0 {
		t.Fatalf("files %v after a short output", names)
	}
	res := call(t, set, "execute", map[string]any{"command": "seq 1 100"})
	if res.OutputPath == "" || readFile(t, res.OutputPath) != seqLines(100) {
		t.Fatalf("long output: %+v", res)
	}
	bg := call(t, set, "execute", map[string]any{"command": "sleep 1; echo done", "background": true})
	out := call(t, set, "job_output", map[string]any{"id": bg.JobID})
	if out.OutputPath == "" {
		t.Fatalf("job_output %+v: no file for a background job", out)
	}
	if got := readFile(t, out.OutputPath); got != "" {
		t.Fatalf("background job's file holds %q before any output", got)
	}
	awaitJobEnd(t, set, bg.JobID)
	if got := readFile(t, out.OutputPath); got != "done\n" {
		t.Errorf("background job's file holds %q, want its output", got)
	}
}

// job_output pages by whole lines: the latest page starts at a line, and a
// page with more after it ends at one, so paging on with next since never
// shows a piece of a line as if it were a line.
func TestJobOutputPagesWholeLines(t *testing.T) {
	// 999: no page boundary of the plain byte count falls between lines.
	set, _ := newRunner(t, execute.Config{OutputLimit: 999})
	res := call(t, set, "execute", map[string]any{"command": "seq 1 3000", "background": true})
	if res.JobID == "" {
		t.Fatalf("result = %+v", res)
	}
	awaitJobEnd(t, set, res.JobID)
	full := seqLines(3000)
	checkPage := func(out tool.Result) (from, to int) {
		t.Helper()
		text, trailer, ok := strings.Cut(out.Output, "[job ")
		var total, next int
		if _, err := fmt.Sscanf(trailer[strings.Index(trailer, "bytes "):], "bytes %d-%d of %d; next since=%d]", &from, &to, &total, &next); !ok || err != nil {
			t.Fatalf("no trailer in %q: %v", out.Output, err)
		}
		if text != full[from:to] || (from > 0 && full[from-1] != '\n') || (to < len(full) && full[to-1] != '\n') {
			t.Fatalf("page %d-%d is not whole lines of the output: %q", from, to, text)
		}
		return from, to
	}
	if from, to := checkPage(call(t, set, "job_output", map[string]any{"id": res.JobID})); to != len(full) || to-from > 999 {
		t.Errorf("latest page is %d-%d of %d", from, to, len(full))
	}
	for since, pages := 0, 0; since < len(full); pages++ {
		if pages > len(full)/500 {
			t.Fatalf("paging did not get on: since=%d", since)
		}
		from, to := checkPage(call(t, set, "job_output", map[string]any{"id": res.JobID, "since": since}))
		if from != since || to <= from {
			t.Fatalf("since=%d gave %d-%d", since, from, to)
		}
		since = to
	}
}
