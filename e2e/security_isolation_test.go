package e2e_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// deniedSyscalls are x86_64 system call numbers that must fail with EPERM
// for the agent's children, with the arguments each gets (the filter
// answers before the kernel looks at them).
var deniedSyscalls = []struct {
	name string
	call string // arguments after the number, for libc.syscall
}{
	{"unshare", "0x10000000"}, // CLONE_NEWUSER: allowed to anyone without a filter
	{"mount", `b"none", b"/tmp", b"tmpfs", 0, None`},
	{"keyctl", "0, -3, 0"}, // KEYCTL_GET_KEYRING_ID of the session keyring
	{"bpf", "0, None, 0"},
	{"ptrace", "0, 0, 0, 0"}, // PTRACE_TRACEME
	{"io_uring_setup", "1, ctypes.create_string_buffer(120)"},
	{"userfaultfd", "0"},
	{"perf_event_open", "ctypes.create_string_buffer(128), 0, -1, -1, 0"},
}

var syscallNumbers = map[string]int{
	"unshare": 272, "mount": 165, "keyctl": 250, "bpf": 321, "ptrace": 101,
	"io_uring_setup": 425, "userfaultfd": 323, "perf_event_open": 298,
}

// TestSecuritySandboxes checks, through execute in real sandboxes, that
// denied system calls fail, that two sandboxes cannot see each other, and
// that one sandbox's LLM proxy token is refused on another's socket.
func TestSecuritySandboxes(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	a, b := e.dial(""), e.dial("")
	aID, bID := a.conn.Thread(), b.conn.Thread()

	t.Run("denied syscalls fail with EPERM for commands", func(t *testing.T) {
		if arch := a.sh("uname -m", 30).Output; !strings.Contains(arch, "x86_64") {
			t.Skipf("syscall numbers are for x86_64, not %s", arch)
		}
		var py strings.Builder
		py.WriteString("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n")
		for _, sc := range deniedSyscalls {
			py.WriteString("r = libc.syscall(" + strconv.Itoa(syscallNumbers[sc.name]) + ", " + sc.call + ")\n")
			py.WriteString("print('" + sc.name + "', r, ctypes.get_errno())\n")
		}
		r := a.sh("python3 - <<'PY'\n"+py.String()+"PY", 60)
		t.Logf("syscalls:\n%s", r.Output)
		for _, sc := range deniedSyscalls {
			if !strings.Contains(r.Output, sc.name+" -1 1\r") && !strings.Contains(r.Output, sc.name+" -1 1\n") {
				t.Errorf("%s: want -1 with errno 1 (EPERM) in:\n%s", sc.name, r.Output)
			}
		}
	})

	t.Run("one sandbox cannot see another", func(t *testing.T) {
		hex := randHex(6)
		marker := "bwmark" + hex
		// The commands name the marker and B's id split by '' so that
		// their own command lines do not match.
		find := "M=bwmark''" + hex + "; B=t_''" + strings.TrimPrefix(bID, "t_") + "; "
		b.runTool("execute", map[string]any{"command": find + `exec -a "$M" sleep 300`, "background": true}, turnTimeout)
		if out := b.sh(find+`echo secret > "/workspace/$M.txt"; ps -eo args`, 30).Output; !strings.Contains(out, marker) {
			t.Fatalf("sandbox B has no marker process:\n%s", out)
		}
		out := a.sh(find+`ls -a /run/boxwire; echo ---; ps -eo pid,user,args; echo ---; `+
			`find / -xdev -name "$M*" 2>/dev/null; grep -l "$M" /proc/[0-9]*/cmdline 2>/dev/null; `+
			`grep -c "$B" /proc/mounts; echo end`, 60).Output
		t.Logf("sandbox A sees:\n%s", out)
		if strings.Contains(out, marker) {
			t.Errorf("sandbox A sees sandbox B's process or file %s", marker)
		}
		if strings.Contains(out, bID) {
			t.Errorf("sandbox A sees sandbox B's socket folder or volume")
		}
		sockets := strings.TrimSpace(strings.SplitN(out, "---", 2)[0])
		for _, f := range strings.Fields(sockets) {
			if f != "." && f != ".." && !strings.HasSuffix(f, ".sock") {
				t.Errorf("unexpected entry %q in A's socket folder", f)
			}
		}
		if !strings.Contains(out, "boxwire-agent") {
			t.Errorf("sandbox A does not even see its own agent: ps is broken")
		}
	})

	t.Run("another sandbox's LLM token is refused", func(t *testing.T) {
		goodA, goodB := e.llmTokens(aID), e.llmTokens(bID) // llmtoken_test.go: found in each agent's memory
		if len(goodA) == 0 || len(goodB) == 0 || goodA[0] == goodB[0] {
			t.Fatalf("tokens: %d of A, %d of B", len(goodA), len(goodB))
		}
		tokA, tokB := goodA[0], goodB[0]
		sockA := filepath.Join(e.dataDir, "run", aID, "llm.sock")
		sockB := filepath.Join(e.dataDir, "run", bID, "llm.sock")
		cases := []struct {
			sock, token string
			want        int
		}{
			{sockA, tokA, 200},
			{sockA, tokB, 401},
			{sockB, tokA, 401},
			{sockB, tokB, 200},
			{sockA, e.token, 401},
			{sockA, e.apiKey, 401},
		}
		for _, c := range cases {
			if got := unixGet(t, c.sock, "/v1/models", c.token); got != c.want {
				t.Errorf("GET /v1/models on %s with token %.8s…: %d, want %d", filepath.Base(filepath.Dir(c.sock)), c.token, got, c.want)
			}
		}
	})
}
