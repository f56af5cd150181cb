package shell_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitLimit = 10 * time.Second

// buffer is an io.Writer that tests can watch.
type buffer struct{ testutil.Buffer }

// waitFor fails the test unless the output contains want before the limit.
func (b *buffer) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.Until(t, "output containing "+strconv.Quote(want), waitLimit, func() error {
		if got := b.String(); !strings.Contains(got, want) {
			return fmt.Errorf("output %q", got)
		}
		return nil
	})
}

func start(t *testing.T, spec shell.Spec) (*shell.Process, *buffer) {
	t.Helper()
	out := &buffer{}
	spec.Output = out
	p, err := shell.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, out
}

// wait calls p.Wait and fails the test if it takes longer than the limit.
func wait(t *testing.T, p *shell.Process) (int, error) {
	t.Helper()
	type result struct {
		code int
		err  error
	}
	r := testutil.Within(t, "Wait", waitLimit, func() result {
		code, err := p.Wait()
		return result{code, err}
	})
	return r.code, r.err
}

func bash(script string) []string { return []string{"bash", "-c", script} }

func TestEchoAndExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		script string
		code   int
		output string
	}{
		{"echo", "echo hello", 0, "hello\r\n"},
		{"exit status", "echo out; exit 3", 3, "out\r\n"},
		{"stderr on the terminal", "echo oops >&2; exit 1", 1, "oops\r\n"},
		{"killed by a signal", "kill -TERM $$", 128 + int(syscall.SIGTERM), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, out := start(t, shell.Spec{Command: bash(tt.script), Stdin: shell.StdinNull})
			code, err := wait(t, p)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			if code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
			if got := out.String(); got != tt.output {
				t.Errorf("output = %q, want %q", got, tt.output)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := shell.Start(context.Background(), shell.Spec{}); err == nil {
		t.Error("empty command: no error")
	}
	if _, err := shell.Start(context.Background(), shell.Spec{Command: []string{"/no/such/program"}}); err == nil {
		t.Error("missing program: no error")
	}
	if _, err := shell.Start(context.Background(), shell.Spec{Command: []string{"true"}, Dir: "/no/such/dir"}); err == nil {
		t.Error("missing dir: no error")
	}
}

func TestDirAndEnv(t *testing.T) {
	dir := t.TempDir()
	p, out := start(t, shell.Spec{
		Command: bash(`echo "$PWD $FOO"`),
		Dir:     dir,
		Env:     []string{"FOO=bar", "PATH=" + os.Getenv("PATH")},
		Stdin:   shell.StdinNull,
	})
	if _, err := wait(t, p); err != nil {
		t.Fatal(err)
	}
	if want := dir + " bar\r\n"; out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
}

func TestInteractiveInput(t *testing.T) {
	p, out := start(t, shell.Spec{Command: []string{"cat"}})
	if _, err := p.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the line, then cat prints it.
	out.waitFor(t, "ping\r\nping\r\n")
	if _, err := p.Write([]byte{4}); err != nil { // ^D: end of input
		t.Fatal(err)
	}
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("wait = %d, %v; want 0, nil", code, err)
	}
}

func TestResize(t *testing.T) {
	p, out := start(t, shell.Spec{
		Command: bash(`stty size; read x; stty size`),
		Cols:    100, Rows: 30,
	})
	out.waitFor(t, "30 100\r\n")
	if err := p.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "43 132\r\n")
	if _, err := wait(t, p); err != nil {
		t.Fatal(err)
	}
}

func TestStdinNull(t *testing.T) {
	p, out := start(t, shell.Spec{
		Command: bash(`read x; echo "read=$?"; test -t 0 || echo stdin-not-tty; test -t 1 && echo stdout-tty; tty <&1 >/dev/null && echo ctty`),
		Stdin:   shell.StdinNull,
	})
	if _, err := wait(t, p); err != nil {
		t.Fatal(err)
	}
	want := "read=1\r\nstdin-not-tty\r\nstdout-tty\r\nctty\r\n"
	if out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
}

// alive reports whether pid names a live process (zombies count as dead).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// waitDead fails the test unless pid is gone (or a zombie) within waitLimit.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("process %d gone", pid), waitLimit, func() bool { return !alive(pid) })
}

// childPid waits for a line "child=N" in the output.
func childPid(t *testing.T, out *buffer) int {
	t.Helper()
	out.waitFor(t, "\r\n")
	line, _, _ := strings.Cut(out.String(), "\r\n")
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "child="))
	if err != nil {
		t.Fatalf("no child pid in %q", out.String())
	}
	return pid
}

func TestCloseKillsProcessGroup(t *testing.T) {
	// The child ignores SIGHUP and SIGTERM; only SIGKILL after the grace
	// period gets it.
	p, out := start(t, shell.Spec{
		Command:   bash(`(trap '' HUP TERM; exec sleep 1000) & echo child=$!; wait`),
		KillGrace: 200 * time.Millisecond,
	})
	child := childPid(t, out)
	if !alive(child) {
		t.Fatalf("child %d not running", child)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	waitDead(t, child)
	if _, err := wait(t, p); !errors.Is(err, shell.ErrClosed) {
		t.Errorf("wait error = %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestSignalGroup(t *testing.T) {
	p, out := start(t, shell.Spec{Command: bash(`sleep 1000 & echo child=$!; wait`)})
	child := childPid(t, out)
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, _ := wait(t, p); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code = %d, want %d", code, 128+int(syscall.SIGKILL))
	}
	waitDead(t, child)
}

func TestBackgroundChildDoesNotHangWait(t *testing.T) {
	// The child keeps the terminal open after bash exits; bash waits until
	// the child ignores SIGHUP, which bash's exit sends it.
	p, out := start(t, shell.Spec{
		Command: bash(`(trap '' HUP; touch ready; exec sleep 1000) & echo child=$!; until [ -e ready ]; do sleep 0.01; done`),
		Dir:     t.TempDir(),
		Stdin:   shell.StdinNull,
	})
	child := childPid(t, out)
	began := time.Now()
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("wait = %d, %v; want 0, nil", code, err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("wait took %v", d)
	}
	if !alive(child) {
		t.Fatal("child died before Close")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, child)
}

func TestContextStopsProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &buffer{}
	p, err := shell.Start(ctx, shell.Spec{Command: bash(`echo ready; sleep 1000`), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out.waitFor(t, "ready")
	cancel()
	code, err := wait(t, p)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("wait error = %v, want context.Canceled", err)
	}
	if code != 128+int(syscall.SIGHUP) && code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code = %d, want death by SIGHUP or SIGTERM", code)
	}
}

func TestNoOutputLost(t *testing.T) {
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "%d\r\n", i)
	}
	for i := range 100 {
		script := "echo hi"
		expect := "hi\r\n"
		if i%5 == 0 {
			script, expect = "seq 1 3000", want.String()
		}
		out := &buffer{}
		p, err := shell.Start(context.Background(), shell.Spec{Command: bash(script), Stdin: shell.StdinNull, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		_, err = wait(t, p)
		_ = p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != expect {
			t.Fatalf("run %d: got %d bytes, want %d", i, len(got), len(expect))
		}
	}
}

// Commands on several terminals at once, as the agent runs them, each get
// every byte. Under load the kernel once answered EIO (every holder of the
// terminal closed it) while the last write's output was still on its way
// in, 1 command in about 16,000 here with eight at a time; the next read
// had it. Eight at a time, a hundred each.
func TestNoOutputLostInParallel(t *testing.T) {
	want := seqOutput(3000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				out := &buffer{}
				p, err := shell.Start(context.Background(), shell.Spec{Command: bash("seq 1 3000"), Stdin: shell.StdinNull, Output: out})
				if err != nil {
					t.Error(err)
					return
				}
				_, err = p.Wait()
				_ = p.Close()
				if err != nil {
					t.Error(err)
					return
				}
				if got := out.String(); got != want {
					t.Errorf("terminal %d, run %d: got %d bytes, want %d", g, i, len(got), len(want))
				}
			}
		})
	}
	wg.Wait()
}

func TestWriteAfterClose(t *testing.T) {
	p, _ := start(t, shell.Spec{Command: []string{"cat"}})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("x")); err == nil {
		t.Error("write after close: no error")
	}
	if err := p.Resize(10, 10); err == nil {
		t.Error("resize after close: no error")
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after close = %v, want os.ErrProcessDone", err)
	}
}

func TestCloseKillsAfterGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	p, out := start(t, shell.Spec{
		Command:   bash(`trap '' HUP TERM; echo ready; sleep 1000; echo survived`),
		KillGrace: grace,
	})
	out.waitFor(t, "ready")
	began := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < grace || d > grace+3*time.Second {
		t.Errorf("close took %v, want a little over the %v grace", d, grace)
	}
	if code, _ := wait(t, p); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code = %d, want %d", code, 128+int(syscall.SIGKILL))
	}
}
