package execute_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

func exitCode(t *testing.T, res tool.Result) int {
	t.Helper()
	if res.ExitCode == nil {
		t.Fatalf("no exit code in %+v", res)
	}
	return *res.ExitCode
}

func TestExecute(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	tests := []struct {
		name, command string
		code          int
		output        string
	}{
		{"echo", "echo hello", 0, "hello\n"},
		{"runs in the workspace", "pwd", 0, ws + "\n"},
		{"exit code", "echo bye; exit 7", 7, "bye\n"},
		{"stderr is combined", "echo out; echo err >&2", 0, "out\nerr\n"},
		{"stdin is empty", "cat; read x || echo eof", 0, "eof\n"},
		{"stdout is a terminal", "test -t 1 && echo tty", 0, "tty\n"},
		{"non-interactive env", `echo "$PAGER $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND $TERM"`, 0,
			"cat 0 noninteractive xterm-256color\n"},
		{"escapes are stripped", `printf '\033[1;31mred\033[0m\n'`, 0, "red\n"},
		{"carriage returns rewrite", `printf '10%%\r50%%\r100%%\n'`, 0, "100%\n"},
		{"no output", "true", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, set, "execute", map[string]any{"command": tt.command})
			if res.Err != "" {
				t.Fatalf("Err = %q", res.Err)
			}
			if code := exitCode(t, res); code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
			if res.Output != tt.output || res.Truncated {
				t.Errorf("Output = %q (truncated %v), want %q", res.Output, res.Truncated, tt.output)
			}
		})
	}
}

// stream records chunks; with onFirst set it calls onFirst once, with the
// first chunk.
type stream struct {
	mu      sync.Mutex
	chunks  []string
	onFirst func()
}

func (s *stream) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, string(p))
	if len(s.chunks) == 1 && s.onFirst != nil {
		s.onFirst()
	}
}

func TestExecuteStreams(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	// The command prints b only once the test has been streamed a chunk:
	// a result that came only at the end would never come.
	s := stream{onFirst: func() {
		if err := os.WriteFile(filepath.Join(ws, "streamed"), nil, 0o644); err != nil {
			t.Error(err)
		}
	}}
	res := callWith(t, context.Background(), set, tool.Call{Output: s.write}, "execute",
		map[string]any{"command": "echo a; until [ -e streamed ]; do sleep 0.01; done; echo b"})
	if res.Output != "a\nb\n" {
		t.Fatalf("Output = %q", res.Output)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Join(s.chunks, "") != "a\r\nb\r\n" {
		t.Errorf("streamed %q, want the raw terminal output", s.chunks)
	}
	if len(s.chunks) < 2 || !strings.HasPrefix(s.chunks[0], "a") || strings.Contains(s.chunks[0], "b") {
		t.Fatalf("chunks = %q, want a first chunk with only a", s.chunks)
	}
}

func TestExecuteTimeoutKillsGroup(t *testing.T) {
	set, ws := newRunner(t, execute.Config{ExecTimeout: 2 * time.Second})
	began := time.Now()
	res := call(t, set, "execute", map[string]any{
		"command": "sleep 1000 & echo $! > child.pid; wait",
	})
	if !strings.HasPrefix(res.Err, "command timed out after 2s") || res.Status != wire.StatusTimedOut {
		t.Errorf("Err = %q, status %q", res.Err, res.Status)
	}
	if d := time.Since(began); d > 8*time.Second {
		t.Errorf("took %v", d)
	}
	waitDead(t, readPid(t, filepath.Join(ws, "child.pid")))

	// The per-call timeout replaces the default.
	res = call(t, set, "execute", map[string]any{"command": "sleep 0.5; echo done", "timeout": 5})
	if res.Err != "" || res.Output != "done\n" {
		t.Errorf("with timeout 5: %+v", res)
	}
}

func TestExecuteInterrupted(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	var s stream
	go func() {
		deadline := time.Now().Add(callLimit)
		for time.Now().Before(deadline) {
			s.mu.Lock()
			n := len(s.chunks)
			s.mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res := callWith(t, ctx, set, tool.Call{Output: s.write}, "execute",
		map[string]any{"command": "sleep 1000 & echo $! > child.pid; echo started; wait"})
	if !strings.HasPrefix(res.Err, "interrupted") {
		t.Errorf("Err = %q", res.Err)
	}
	if !strings.Contains(res.Output, "started") {
		t.Errorf("Output = %q", res.Output)
	}
	waitDead(t, readPid(t, filepath.Join(ws, "child.pid")))
}

func TestExecuteBackgroundChildDoesNotHang(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	began := time.Now()
	// The child ignores the SIGHUP that bash's exit sends; bash waits until
	// it does so.
	res := call(t, set, "execute", map[string]any{
		"command": `(trap '' HUP; echo $BASHPID > child.pid; exec sleep 1000) & until [ -s child.pid ]; do sleep 0.01; done; echo parent done`,
	})
	if res.Err != "" || exitCode(t, res) != 0 || res.Output != "parent done\n" {
		t.Errorf("result = %+v", res)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	waitDead(t, readPid(t, filepath.Join(ws, "child.pid")))
}

func TestExecuteTruncates(t *testing.T) {
	set, _ := newRunner(t, execute.Config{OutputLimit: 1000})
	res := call(t, set, "execute", map[string]any{"command": "seq 1 2000"})
	if exitCode(t, res) != 0 || !res.Truncated {
		t.Fatalf("result = %+v", res)
	}
	var full strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	if res.TotalBytes != int64(full.Len()) || res.TotalLines != 2000 {
		t.Errorf("TotalBytes = %d, TotalLines = %d, want %d, 2000", res.TotalBytes, res.TotalLines, full.Len())
	}
	if res.OutputPath == "" || readFile(t, res.OutputPath) != full.String() {
		t.Errorf("OutputPath %q does not hold the full output", res.OutputPath)
	}
	head, tail, ok := strings.Cut(res.Output, "\n... [")
	if !ok {
		t.Fatalf("no marker in %q", res.Output)
	}
	if !strings.HasPrefix(head, "1\n2\n3\n") {
		t.Errorf("head = %q", head[:20])
	}
	if !strings.HasSuffix(tail, "1999\n2000\n") {
		t.Errorf("tail ends %q", tail[len(tail)-20:])
	}
	// Whole lines only, and the marker counts what is between them.
	head += "\n" // the head's last newline began the marker
	marker, tail, _ := strings.Cut(tail, "] ...\n")
	if !strings.HasSuffix(head, "\n") || !strings.HasPrefix(full.String()[len(full.String())-len(tail)-1:], "\n") {
		t.Errorf("a line was cut: head ends %q, tail begins %q", head[len(head)-5:], tail[:5])
	}
	omitted := full.String()[len(head) : full.Len()-len(tail)]
	want := fmt.Sprintf("%d lines, %d bytes omitted; the full output is in %s", strings.Count(omitted, "\n"), len(omitted), res.OutputPath)
	if marker != want {
		t.Errorf("marker %q, want %q", marker, want)
	}
	if len(res.Output) > 1000+200 {
		t.Errorf("output is %d bytes for a limit of 1000", len(res.Output))
	}

	// Output under the limit is not cut.
	res = call(t, set, "execute", map[string]any{"command": "seq 1 10"})
	if res.Truncated || res.TotalBytes != 21 || res.TotalLines != 10 || res.OutputPath != "" || res.Output != "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n" {
		t.Errorf("short output: %+v", res)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitDead fails the test unless pid is gone (or a zombie) within callLimit.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("process %d gone", pid), callLimit, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		return err != nil || (i > 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X'))
	})
}
