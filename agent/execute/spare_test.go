package execute_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// The spare shell runs the next command exactly as bash -lc would: same
// output, exit codes, quoting, and a profile that reflects the previous
// command's changes.
func TestSpareShellRunsTheNextCommand(t *testing.T) {
	home := t.TempDir()
	set, _ := newRunner(t, execute.Config{Env: []string{"HOME=" + home}})

	res := call(t, set, "execute", map[string]any{"command": `echo 'export BW_MARK=from-profile' >> ~/.profile`})
	mustExit(t, res, 0)
	pid := execute.SparePID(set, callLimit)
	if pid == 0 {
		t.Fatal("no spare shell after a command ended")
	}
	res = call(t, set, "execute", map[string]any{"command": `echo "$$ $BW_MARK"; printf '%s|' "a b" 'c"d' $'e\tf'; echo; exit 7`})
	mustExit(t, res, 7)
	want := strconv.Itoa(pid) + " from-profile\na b|c\"d|e\tf|\n"
	if res.Output != want {
		t.Fatalf("output %q, want %q (run by the spare, with the profile the last command wrote)", res.Output, want)
	}
}

func TestSpareShellThatDiedIsReplaced(t *testing.T) {
	set, _ := newRunner(t, execute.Config{})
	mustExit(t, call(t, set, "execute", map[string]any{"command": "true"}), 0)
	pid := execute.SparePID(set, callLimit)
	if pid == 0 {
		t.Fatal("no spare shell")
	}
	// Until the spare has read its login files, processes it forks for
	// them share its end of the pipe, and would keep it open once it died.
	awaitReadingCommand(t, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid) // a zombie has closed its end of the pipe
	res := call(t, set, "execute", map[string]any{"command": "echo still-works"})
	mustExit(t, res, 0)
	if res.Output != "still-works\n" {
		t.Fatalf("output %q", res.Output)
	}
}

func mustExit(t *testing.T, res tool.Result, code int) {
	t.Helper()
	if res.ExitCode == nil || *res.ExitCode != code {
		t.Fatalf("result %+v: want exit %d", res, code)
	}
}

// A spare whose login files changed after it started is not used: two
// spares wait after the first command, the second command edits the
// profile, and the third must see the edit.
func TestStaleSpareIsNotUsed(t *testing.T) {
	home := t.TempDir()
	set, _ := newRunner(t, execute.Config{Env: []string{"HOME=" + home}})
	mustExit(t, call(t, set, "execute", map[string]any{"command": "true"}), 0)
	if execute.SparePID(set, callLimit) == 0 {
		t.Fatal("no spare shell")
	}
	time.Sleep(200 * time.Millisecond) // the second spare
	mustExit(t, call(t, set, "execute", map[string]any{"command": `echo 'export BW_LATE=yes' >> ~/.profile`}), 0)
	res := call(t, set, "execute", map[string]any{"command": `echo "[$BW_LATE]"`})
	if res.Output != "[yes]\n" {
		t.Fatalf("output %q: a spare started before the profile changed ran the command", res.Output)
	}
}

// awaitReadingCommand waits until the spare shell pid is blocked reading
// its command (its /proc/PID/syscall shows a read(2) on a descriptor that
// is the pipe of its fd 3: `read <&3` reads it as fd 0).
func awaitReadingCommand(t *testing.T, pid int) {
	t.Helper()
	sysRead, ok := map[string]string{"amd64": "0", "arm64": "63"}[runtime.GOARCH]
	if !ok {
		t.Skipf("no read(2) syscall number for %s", runtime.GOARCH)
	}
	testutil.Until(t, fmt.Sprintf("spare shell %d waiting for its command", pid), callLimit, func() error {
		sc, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall"))
		if err != nil {
			t.Fatalf("spare shell %d: %v", pid, err)
		}
		if f := strings.Fields(string(sc)); len(f) > 1 && f[0] == sysRead {
			fd, _ := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 64)
			target, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", strconv.FormatInt(fd, 10)))
			pipe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", "3"))
			if strings.HasPrefix(target, "pipe:") && target == pipe {
				return nil
			}
		}
		return fmt.Errorf("syscall %q", sc)
	})
}

// A command on a spare shell reads as bash -lc reads it, in the remembered
// shell or a fresh one: its line numbers are its own, a command longer
// than the spare's pipe arrives whole (a remembered one through a restore
// file), values with newlines come back, and a NUL byte ends a command.
func TestSpareShellTakesTheCommandWhole(t *testing.T) {
	long := "x=" + strings.Repeat("y", 200<<10) + "; echo ${#x}"
	set, ws := newRunner(t, execute.Config{})
	mustExit(t, call(t, set, "execute", map[string]any{"command": "true"}), 0)
	tests := []struct {
		name, command string
		fresh         bool
		output        string
	}{
		{"line numbers", "echo $LINENO\necho $LINENO", false, "1\n2\n"},
		{"line numbers, fresh", "echo $LINENO\necho $LINENO", true, "1\n2\n"},
		{"syntax error", "echo a\n(", false, "a\nbash: eval: line 3: syntax error: unexpected end of file\n"}, // as bash -c says it
		{"longer than the pipe", long, false, "204800\n"},
		{"longer than the pipe, fresh", long, true, "204800\n"},
		{"NUL, fresh", "echo a\x00echo b", true, "a\n"},
		{"newlines in the state", `mkdir -p $'n\nl' && cd $'n\nl' && export N=$'a\nb'`, false, ""},
		{"newlines carried", `printf '%q %q\n' "$N" "$PWD"; echo $LINENO`, false, "$'a\\nb' $'" + ws + "/n\\nl'\n1\n"},
	}
	for _, tt := range tests {
		pid := execute.SparePID(set, callLimit)
		if pid == 0 {
			t.Fatal("no spare shell")
		}
		awaitReadingCommand(t, pid)
		// On the command's first line: its line numbers stay as they are.
		res := call(t, set, "execute", map[string]any{"command": "echo $$; " + tt.command, "fresh": tt.fresh})
		if want := strconv.Itoa(pid) + "\n" + tt.output; res.Output != want {
			t.Errorf("%s: output %q, want %q (from spare %d)", tt.name, res.Output, want, pid)
		}
	}
}
