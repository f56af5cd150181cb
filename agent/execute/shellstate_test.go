package execute_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// sh runs command in execute with extra arguments and wants it to exit.
func sh(t *testing.T, ctx context.Context, set *execute.Runner, command string, extra map[string]any) tool.Result {
	t.Helper()
	args := map[string]any{"command": command}
	for k, v := range extra {
		args[k] = v
	}
	return callWith(t, ctx, set, tool.Call{ID: "c1"}, "execute", args)
}

func wantOutput(t *testing.T, res tool.Result, output, cwd string) {
	t.Helper()
	if res.Output != output || res.Cwd != cwd {
		t.Fatalf("output %q, cwd %q; want %q in %q (result %+v)", res.Output, res.Cwd, output, cwd, res)
	}
}

// The directory and the exported variables carry from one call to the next;
// a fresh call neither sees nor changes them.
func TestShellRemembers(t *testing.T) {
	set, ws := newRunner(t, execute.Config{})
	ctx := context.Background()
	other := t.TempDir()

	res := sh(t, ctx, set, "echo start", nil)
	wantOutput(t, res, "start\n", ws)
	res = sh(t, ctx, set, "cd /tmp && export X=1", nil)
	mustExit(t, res, 0)
	wantOutput(t, res, "", "/tmp")
	res = sh(t, ctx, set, "pwd; echo $X", nil)
	wantOutput(t, res, "/tmp\n1\n", "/tmp")

	res = sh(t, ctx, set, `pwd; echo "[$X]"; cd `+other+"; export Y=2", map[string]any{"fresh": true})
	wantOutput(t, res, ws+"\n[]\n", "")
	res = sh(t, ctx, set, `pwd; echo "[$X$Y]"`, nil)
	wantOutput(t, res, "/tmp\n[1]\n", "/tmp")

	// unset and changed values carry too; an exit code is kept.
	res = sh(t, ctx, set, "unset X; export Z='a b'\"'\"'c'; cd "+other+"; exit 3", nil)
	mustExit(t, res, 3)
	res = sh(t, ctx, set, `pwd; echo "[${X-unset}] [$Z]"`, nil)
	wantOutput(t, res, other+"\n[unset] [a b'c]\n", other)

	// Any value comes back as it was (export -p's quoting, parsed).
	const odd = `export W=$'l1\nl2\t"q" $d \\ \' \x01 \u00e9 ` + "`b`" + `' E=; printf '%q|%q\n' "$W" "$E"`
	first := sh(t, ctx, set, odd, nil)
	mustExit(t, first, 0)
	if again := sh(t, ctx, set, `printf '%q|%q\n' "$W" "$E"`, nil); again.Output != first.Output || first.Output == "|''\n" {
		t.Fatalf("values after the export %q, in the next call %q", first.Output, again.Output)
	}

	// A subshell's exit moves nothing; a bare exit keeps the status.
	res = sh(t, ctx, set, "(cd / && export X=4; exit 0); false; exit", nil)
	mustExit(t, res, 1)
	wantOutput(t, sh(t, ctx, set, `pwd; echo "[${X-unset}]"`, nil), other+"\n[unset]\n", other)

	// A directory that is gone: the next command starts in the workspace.
	gone := filepath.Join(ws, "gone")
	mustExit(t, sh(t, ctx, set, "mkdir "+gone+" && cd "+gone, nil), 0)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	res = sh(t, ctx, set, "pwd", nil)
	wantOutput(t, res, "boxwire: "+gone+" is gone; starting in "+ws+"\n"+ws+"\n", ws)
}

// A command that timed out or was interrupted leaves the state as it was.
func TestShellStateSurvivesKilledCommands(t *testing.T) {
	set, _ := newRunner(t, execute.Config{})
	ctx := context.Background()
	mustExit(t, sh(t, ctx, set, "cd /tmp && export X=1", nil), 0)

	res := sh(t, ctx, set, "cd / && export X=2 && sleep 30", map[string]any{"timeout": 1})
	if res.Status != wire.StatusTimedOut || res.Cwd != "/tmp" {
		t.Fatalf("timed-out result %+v: want timed_out in /tmp", res)
	}
	wantOutput(t, sh(t, ctx, set, "pwd; echo $X", nil), "/tmp\n1\n", "/tmp")

	ictx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	go func() {
		<-started
		cancel()
	}()
	exec := lookup(t, set, "execute")
	res = testutil.Within(t, "interrupted execute", callLimit, func() tool.Result {
		return exec.Run(ictx, tool.Call{Args: []byte(`{"command":"cd / && export X=3 && echo go && sleep 30"}`),
			Output: func([]byte) {
				select {
				case <-started:
				default:
					close(started)
				}
			}})
	})
	if res.Status != wire.StatusInterrupted {
		t.Fatalf("interrupted result %+v", res)
	}
	wantOutput(t, sh(t, ctx, set, "pwd; echo $X", nil), "/tmp\n1\n", "/tmp")

	// A background job starts where the shell is and leaves it there.
	bg := filepath.Join(t.TempDir(), "bg.txt")
	res = sh(t, ctx, set, "pwd > "+bg+"; cd /", map[string]any{"background": true})
	if res.Status != wire.StatusBackground || res.Cwd != "/tmp" {
		t.Fatalf("background result %+v", res)
	}
	testutil.Eventually(t, "the background job's file", callLimit, func() bool {
		b, err := os.ReadFile(bg)
		return err == nil && string(b) == "/tmp\n"
	})
	wantOutput(t, sh(t, ctx, set, "pwd", nil), "/tmp\n", "/tmp")
}

// The remembered state reaches a command run by a spare shell, and a spare
// still reads the login profile as it is now.
func TestShellStateThroughSpareShell(t *testing.T) {
	home := t.TempDir()
	set, _ := newRunner(t, execute.Config{Env: []string{"HOME=" + home}})
	ctx := context.Background()
	mustExit(t, sh(t, ctx, set, "cd /tmp && export X=1 && echo 'export BW_PROFILE=yes' >> ~/.profile", nil), 0)
	pid := execute.SparePID(set, callLimit)
	if pid == 0 {
		t.Fatal("no spare shell after a command ended")
	}
	// The spare started before the profile's edit? Either way the next
	// command sees the edit (a stale spare is not used).
	res := sh(t, ctx, set, `echo "$(pwd) $X $BW_PROFILE"`, nil)
	wantOutput(t, res, "/tmp 1 yes\n", "/tmp")
	pid = execute.SparePID(set, callLimit)
	res = sh(t, ctx, set, `echo "$$ $(pwd) $X"`, nil)
	wantOutput(t, res, strconv.Itoa(pid)+" /tmp 1\n", "/tmp")
}

// Each thread has its own shell; a command waiting for input is still
// detected in the remembered shell.
func TestShellStatePerThread(t *testing.T) {
	set, ws := newRunner(t, execute.Config{InputIdle: 500 * time.Millisecond})
	a := execute.WithThread(context.Background(), "t_a")
	b := execute.WithThread(context.Background(), "t_b")
	mustExit(t, sh(t, a, set, "cd /tmp && export X=a", nil), 0)
	wantOutput(t, sh(t, b, set, `pwd; echo "[$X]"`, nil), ws+"\n[]\n", ws)
	mustExit(t, sh(t, b, set, "export X=b", nil), 0)
	wantOutput(t, sh(t, a, set, `pwd; echo "[$X]"`, nil), "/tmp\n[a]\n", "/tmp")
	wantOutput(t, sh(t, b, set, `pwd; echo "[$X]"`, nil), ws+"\n[b]\n", ws)

	res := sh(t, a, set, "cd / && read -p 'name? ' n </dev/tty && echo hi $n", nil)
	if res.Status != wire.StatusAwaitingInput || res.Cwd != "/tmp" {
		t.Fatalf("result %+v: want awaiting_input, the shell still in /tmp", res)
	}
	if res := callWith(t, context.Background(), set, tool.Call{}, "job_kill", map[string]any{"id": res.JobID}); res.Err != "" {
		t.Fatalf("job_kill: %+v", res)
	}
}
