package e2e_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Containment limits of the bridge in TestSecurityContainment: small, so
// that every case reaches its limit quickly.
const (
	containPids   = 200
	containMemory = 256 << 20
	containCPUs   = 0.5
	containTmpfs  = 64 << 20
	// containWorkspace is the /workspace cap (workspace_helpers_test.go).
	containWorkspace = 64 << 20
	// maxPing is the slowest round trip the other session may see while a
	// case runs: issue 5's bound (a few ms are measured here, with the
	// race-built bridge on a shared machine).
	maxPing = time.Second
	// floodBytes is how much the output flood prints.
	floodBytes = 4 << 20
)

// TestSecurityContainment runs hostile commands in one sandbox through
// run_tool while another session on the same bridge keeps pinging its own
// agent, and checks that each is contained at its limit, that the hostile
// sandbox's agent survives, and that the other session stays responsive.
func TestSecurityContainment(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge(
		"BOXWIRE_PIDS_LIMIT="+strconv.Itoa(containPids),
		"BOXWIRE_MEMORY_BYTES="+strconv.Itoa(containMemory),
		"BOXWIRE_CPUS="+strconv.FormatFloat(containCPUs, 'f', -1, 64),
		"BOXWIRE_TMPFS_BYTES="+strconv.Itoa(containTmpfs),
		"BOXWIRE_WORKSPACE_SIZE="+strconv.Itoa(containWorkspace),
	)
	hostile, other := e.dial(""), e.dial("")
	cid := e.containerOf(hostile.conn.Thread())

	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"fork bomb stops at the pids limit", func(t *testing.T) { forkBomb(t, hostile) }},
		{"agent answers while a command holds every pid", func(t *testing.T) { pidsHeld(t, hostile) }},
		{"memory hog is OOM-killed, agent survives", func(t *testing.T) { memoryHog(t, hostile, cid) }},
		{"disk fill ends in ENOSPC at the tmpfs cap", func(t *testing.T) { diskFill(t, hostile) }},
		{"workspace fill ends in ENOSPC at the workspace cap", func(t *testing.T) { workspaceFill(t, hostile, containWorkspace) }},
		{"cpu spinner held at the cpu limit", func(t *testing.T) { cpuSpinner(t, hostile) }},
		{"output flood is truncated, bridge memory bounded", func(t *testing.T) { outputFlood(t, e, hostile) }},
		{"sleep past the timeout is killed", func(t *testing.T) { sleepPastTimeout(t, hostile) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := watchPings(other, 200*time.Millisecond)
			tc.run(t)
			slowest, n, fails := p.stop()
			t.Logf("other session during %q: %d pings, slowest %v", tc.name, n, slowest)
			if len(fails) > 0 || n == 0 || slowest > maxPing {
				t.Errorf("other session: %d pings, slowest %v (limit %v), failures %v", n, slowest, maxPing, fails)
			}
			if r := hostile.sh("echo alive", 30); !strings.Contains(r.Output, "alive") {
				t.Errorf("hostile sandbox's agent after the case: %+v", r)
			}
		})
	}
}

// forkBomb forks until the kernel refuses, then reaps the children.
func forkBomb(t *testing.T, s *session) {
	r := s.sh(`cat /sys/fs/cgroup/pids/pids.max; python3 -c '
import os, time
kids, err = [], None
while len(kids) < 100000:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
print("forked", len(kids), "errno", err)
for p in kids:
    os.waitpid(p, 0)
'; grep max /sys/fs/cgroup/pids/pids.events`, 60)
	t.Logf("fork bomb: %s", strings.TrimSpace(r.Output))
	var forked, errno int
	if i := strings.Index(r.Output, "forked "); i < 0 {
		t.Fatalf("fork bomb output: %+v", r)
	} else {
		fmt.Sscanf(r.Output[i:], "forked %d errno %d", &forked, &errno)
	}
	if errno != 11 || forked >= containPids || forked < containPids/4 {
		t.Fatalf("forked %d children, errno %d: want EAGAIN (11) below the limit of %d", forked, errno, containPids)
	}
}

// memoryHog allocates until the container's OOM killer ends it.
func memoryHog(t *testing.T, s *session, cid string) {
	before := oomKills(t, cid)
	r := s.sh(`python3 -c '
x = []
while True:
    x.append(bytearray(16 << 20))
'`, 60)
	after := oomKills(t, cid)
	t.Logf("memory hog: exit %d, status %q, oom_kill %d -> %d", exitCode(r), r.Status, before, after)
	if exitCode(r) != 137 {
		t.Errorf("memory hog: exit %d, want 137 (SIGKILL by the OOM killer): %+v", exitCode(r), r)
	}
	if after <= before {
		t.Errorf("memory.oom_control oom_kill did not grow: %d -> %d", before, after)
	}
}

// oomKills reads the oom_kill counter of the container's memory cgroup.
func oomKills(t *testing.T, cid string) int {
	out := dockerExec(t, cid, "cat", "/sys/fs/cgroup/memory/memory.oom_control")
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v
		}
	}
	t.Fatalf("no oom_kill in memory.oom_control:\n%s", out)
	return 0
}

// diskFill writes past the /tmp tmpfs cap.
func diskFill(t *testing.T, s *session) {
	r := s.sh(`dd if=/dev/zero of=/tmp/fill bs=1M count=`+strconv.Itoa(2*containTmpfs>>20)+` 2>&1 | grep -v records;`+
		` ls -l /tmp/fill; rm -f /tmp/fill; df -k /tmp /workspace /dev/shm | tail -n +2`, 60)
	t.Logf("disk fill: %s", strings.TrimSpace(r.Output))
	if !strings.Contains(r.Output, "No space left on device") {
		t.Fatalf("disk fill: no ENOSPC: %+v", r)
	}
	var size int64
	for _, f := range strings.Fields(r.Output) {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n > 1<<20 && n <= containTmpfs {
			size = n
			break
		}
	}
	if size == 0 {
		t.Errorf("the file written was not cut at the %d-byte cap: %s", containTmpfs, r.Output)
	}
}

// cpuSpinner runs more spinners than the sandbox has CPUs and compares the
// cgroup's CPU time with the wall time.
func cpuSpinner(t *testing.T, s *session) {
	const spinners, seconds = 3, 5
	r := s.sh(fmt.Sprintf(`u=/sys/fs/cgroup/cpuacct/cpuacct.usage; a=$(cat $u); t0=$(date +%%s%%N);`+
		` for i in $(seq %d); do timeout %d sh -c 'while :; do :; done' & done; wait;`+
		` echo CPU $(( $(cat $u) - a )) $(( $(date +%%s%%N) - t0 )); cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us`,
		spinners, seconds), 60)
	var used, wall float64
	i := strings.Index(r.Output, "CPU ")
	if i < 0 {
		t.Fatalf("cpu spinner: %+v", r)
	}
	fmt.Sscanf(r.Output[i:], "CPU %g %g", &used, &wall)
	share := used / wall
	t.Logf("cpu spinner: %d spinners used %.2f CPUs over %.1fs (limit %.2f): %s", spinners, share, wall/1e9, containCPUs,
		strings.Join(strings.Fields(r.Output[i:]), " "))
	if share > containCPUs*1.3 || share < containCPUs*0.2 {
		t.Errorf("cpu usage %.2f CPUs, want about the limit %.2f", share, containCPUs)
	}
}

// outputFlood prints far more than the model may see and checks the cut,
// the marker, the totals and the bridge's memory.
func outputFlood(t *testing.T, e *env, s *session) {
	rss0, peak0 := e.bridge.rss(t)
	run := s.runTool("execute", map[string]any{"timeout": 300,
		"command": fmt.Sprintf(`yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmno | head -c %d`, floodBytes)},
		10*time.Minute)
	rss1, peak1 := e.bridge.rss(t)
	r := run.result
	t.Logf("output flood: %d bytes printed in %v, %d streamed, result %d bytes (truncated %v, total %d bytes / %d lines, file %s); bridge rss %d -> %d MiB, peak %d -> %d MiB",
		floodBytes, run.took.Round(time.Millisecond), run.streamd, len(r.Output), r.Truncated, r.TotalBytes, r.TotalLines, r.OutputPath,
		rss0>>20, rss1>>20, peak0>>20, peak1>>20)
	if !r.Truncated || r.TotalBytes < floodBytes || r.OutputPath == "" || len(r.Output) > 64<<10 {
		t.Errorf("flood result not cut with totals and a file: truncated %v, total %d, path %q, %d bytes",
			r.Truncated, r.TotalBytes, r.OutputPath, len(r.Output))
	}
	if !strings.Contains(r.Output, "bytes omitted") {
		t.Errorf("no truncation marker in the result:\n%.300s", r.Output)
	}
	if grew := peak1 - peak0; grew > 256<<20 {
		t.Errorf("bridge peak memory grew by %d MiB for a %d MiB flood", grew>>20, floodBytes>>20)
	}
}

// sleepPastTimeout runs sleep longer than its timeout.
func sleepPastTimeout(t *testing.T, s *session) {
	run := s.runTool("execute", map[string]any{"command": "sleep 600", "timeout": 2}, turnTimeout)
	r := run.result
	t.Logf("sleep 600 with timeout 2s: status %q after %v: %s", r.Status, run.took.Round(time.Millisecond), r.Error)
	if r.Status != wire.StatusTimedOut || run.took > 30*time.Second {
		t.Fatalf("sleep: status %q after %v, want timed_out soon after 2s: %+v", r.Status, run.took, r)
	}
	if out := s.sh("pgrep -x sleep || echo none", 30).Output; !strings.Contains(out, "none") {
		t.Fatalf("sleep still running after its timeout: %s", out)
	}
}
