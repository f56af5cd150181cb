package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCreateHardened checks the sandbox from its own view: the command
// itself reports its status and network interfaces through the agent
// folder, and execs look at the filesystem and the cgroup limits.
func TestCreateHardened(t *testing.T) {
	e := newEnv(t)
	sockDir := t.TempDir()
	// The sandbox runs as uid 1000, which must be able to write here.
	if err := os.Chmod(sockDir, 0o777); err != nil {
		t.Fatal(err)
	}
	spec := e.spec()
	spec.SocketDir = t.TempDir()
	spec.AgentDir = sockDir
	spec.User = "1000:1000"
	spec.Env = []string{"BOXWIRE_TEST_ENV=hello"}
	spec.PidsLimit = 100
	spec.MemoryBytes = 256 << 20
	spec.NanoCPUs = 5e8
	spec.Cmd = []string{"sh", "-c", "cat /proc/self/status > " + sandbox.AgentMount + "/status; " +
		"ls /sys/class/net > " + sandbox.AgentMount + "/net; exec sleep infinity"}
	before := time.Now().Add(-time.Minute)
	sb := e.create(spec)

	if !sb.Running || sb.Name != spec.Name || sb.Image != testImage || sb.Labels[runLabel] != e.run {
		t.Errorf("Create returned %+v, want running %s from %s labelled %s", sb, spec.Name, testImage, e.run)
	}
	if sb.Created.Before(before) {
		t.Errorf("Created = %v, want recent", sb.Created)
	}
	checkOwnView(t, sockDir)
	checkFilesystem(e, sb.ID, sockDir, spec.SocketDir)
	checkFiles(e, sb.ID, map[string]string{
		"/sys/fs/cgroup/pids/pids.max":                "100",
		"/sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456",
		"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "50000",
		"/sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000",
		"/proc/1/comm":                                "sleep", // Init is off: PID 1 is the command (the real image runs tini)
	})
	if got := e.mustExec(sb.ID, "sh", "-c", "echo $BOXWIRE_TEST_ENV"); got != "hello" {
		t.Errorf("env = %q, want hello", got)
	}
}

// checkOwnView checks what the sandbox's command reported about itself
// through the socket folder.
func checkOwnView(t *testing.T, sockDir string) {
	t.Helper()
	status := waitFile(t, filepath.Join(sockDir, "status"))
	for field, want := range map[string]string{
		"CapEff":     "0000000000000000",
		"CapPrm":     "0000000000000000",
		"CapBnd":     "0000000000000000",
		"NoNewPrivs": "1",
		"Uid":        "1000\t1000\t1000\t1000",
	} {
		if got := statusField(t, status, field); got != want {
			t.Errorf("status %s = %q, want %q", field, got, want)
		}
	}
	if got := strings.Fields(waitFile(t, filepath.Join(sockDir, "net"))); len(got) != 1 || got[0] != "lo" {
		t.Errorf("network interfaces = %q, want only lo", got)
	}
}

// checkFilesystem checks a read-only root, a writable /tmp and a socket
// folder shared with the host.
func checkFilesystem(e *env, id, agentDir, bridgeDir string) {
	t := e.t
	t.Helper()
	if got := e.mustExec(id, "awk", `$2 == "/" { split($4, o, ","); print o[1] }`, "/proc/mounts"); got != "ro" {
		t.Errorf("root mounted %q, want ro", got)
	}
	e.mustExec(id, "touch", "/tmp/ok")
	if got := e.mustExec(id, "stat", "-c", "%a", "/tmp"); got != "1777" {
		t.Errorf("/tmp mode = %s, want 1777", got)
	}
	e.mustExec(id, "sh", "-c", "echo from-inside > "+sandbox.AgentMount+"/hello")
	if b, err := os.ReadFile(filepath.Join(agentDir, "hello")); err != nil || string(b) != "from-inside\n" {
		t.Errorf("agent folder file = %q, %v; want from-inside", b, err)
	}
	// The bridge's folder is read-only inside, whatever its host mode.
	if err := os.Chmod(bridgeDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := e.exec(id, "sh", "-c", "echo x > "+sandbox.SocketMount+"/x"); code == 0 || !strings.Contains(stderr, "Read-only") {
		t.Errorf("write in %s: exit %d %q, want a read-only refusal", sandbox.SocketMount, code, stderr)
	}
}

// checkFiles checks the contents (without surrounding space) of files in
// the sandbox.
func checkFiles(e *env, id string, want map[string]string) {
	e.t.Helper()
	for file, w := range want {
		if got := e.mustExec(id, "cat", file); got != w {
			e.t.Errorf("%s = %q, want %q", file, got, w)
		}
	}
}

// TestCreateDefaults checks that zero limits in the spec take the
// manager's defaults, and that an empty User runs as the image's (root).
func TestCreateDefaults(t *testing.T) {
	e := newEnv(t)
	sb := e.create(e.spec())
	checkFiles(e, sb.ID, map[string]string{
		"/sys/fs/cgroup/pids/pids.max":                "512",
		"/sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648",
		"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "100000",
	})
	if got := e.mustExec(sb.ID, "id", "-u"); got != "0" {
		t.Errorf("uid = %s, want the image's user (0)", got)
	}
	if got := e.mustExec(sb.ID, "awk", `$2 == "/tmp" { print $3, $4 }`, "/proc/mounts"); !strings.HasPrefix(got, "tmpfs ") ||
		!strings.Contains(got, "size=262144k") {
		t.Errorf("/tmp mount = %q, want a tmpfs of the default 256 MiB", got)
	}
	// Root owns /, so only the read-only mount stops this write.
	if _, errOut, code := e.exec(sb.ID, "touch", "/rootfile"); code == 0 || !strings.Contains(errOut, "Read-only") {
		t.Errorf("writing to / as root: exit %d, stderr %q; want a read-only file system", code, errOut)
	}
	// Root in the sandbox still holds no capabilities.
	status := e.mustExec(sb.ID, "cat", "/proc/1/status")
	if got := statusField(t, status, "CapEff"); got != "0000000000000000" {
		t.Errorf("PID 1 CapEff = %s, want none", got)
	}
}

// TestSeccompProfile checks that DockerConfig.SeccompProfile replaces the
// engine's profile: a profile denying mkdir makes mkdir fail.
func TestSeccompProfile(t *testing.T) {
	e := newEnv(t)
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[` +
		`{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{SeccompProfile: profile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	e.mgr = mgr
	sb := e.create(e.spec())
	_, errOut, code := e.exec(sb.ID, "mkdir", "/tmp/denied")
	if code == 0 || !strings.Contains(errOut, "not permitted") {
		t.Errorf("mkdir under the profile: exit %d, stderr %q; want operation not permitted", code, errOut)
	}
	e.mustExec(sb.ID, "touch", "/tmp/allowed")
}

// TestBuiltinSeccompProfile checks SeccompProfile from inside a sandbox:
// each of DeniedSyscalls that exists on x86_64 fails with EPERM, while the
// ordinary calls of a shell keep working.
func TestBuiltinSeccompProfile(t *testing.T) {
	e := newEnv(t)
	profile, err := sandbox.SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{SeccompProfile: profile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	e.mgr = mgr
	sb := e.create(e.spec())
	tests := []struct {
		name string
		nr   int // x86_64
	}{
		{"io_uring_setup", 425}, {"io_uring_enter", 426}, {"io_uring_register", 427},
		{"ptrace", 101}, {"process_vm_readv", 310}, {"process_vm_writev", 311},
		{"personality", 135}, {"userfaultfd", 323}, {"keyctl", 250}, {"add_key", 248},
		{"request_key", 249}, {"bpf", 321}, {"perf_event_open", 298}, {"unshare", 272},
		{"setns", 308}, {"mount", 165}, {"umount2", 166}, {"pivot_root", 155},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog := fmt.Sprintf(`$r = syscall(%d, 0, 0, 0, 0, 0); print "$r ", $!+0`, tc.nr)
			if got := e.mustExec(sb.ID, "perl", "-e", prog); got != "-1 1" {
				t.Errorf("%s: %q, want -1 1 (EPERM)", tc.name, got)
			}
		})
	}
	e.mustExec(sb.ID, "sh", "-c", "mkdir /tmp/d && echo ok > /tmp/d/f && cat /tmp/d/f")
}
