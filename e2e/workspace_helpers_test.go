package e2e_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// workspaceDir is where a bridge on dataDir keeps its capped workspaces'
// image files (bridge/options.go).
func workspaceDir(dataDir string) string { return filepath.Join(dataDir, "workspaces") }

// workspaceLeftovers lists the image files and links in this bridge's
// workspace folder and the loop devices backed by a file in its data
// folder: what a removed workspace must not leave.
func (e *env) workspaceLeftovers() []string {
	e.t.Helper()
	left, err := filepath.Glob(filepath.Join(workspaceDir(e.dataDir), "*"))
	if err != nil {
		e.t.Fatalf("workspace folder: %v", err)
	}
	devs, err := sandbox.LoopDevicesUnder(e.dataDir)
	if err != nil {
		e.t.Fatalf("loop devices: %v", err)
	}
	return append(left, devs...)
}

// detachLoops detaches every loop device backed by a file in this bridge's
// data folder (a mounted one detaches when it is unmounted) and returns
// them.
func (e *env) detachLoops() []string {
	e.t.Helper()
	devs, err := sandbox.LoopDevicesUnder(e.dataDir)
	if err != nil {
		e.t.Fatalf("loop devices: %v", err)
	}
	for _, d := range devs {
		if out, err := exec.Command("losetup", "--detach", d).CombinedOutput(); err != nil {
			e.t.Fatalf("losetup --detach %s: %v %s", d, err, out)
		}
	}
	return devs
}

// workspaceKB is the size in KiB of the filesystem at /workspace, from df.
func workspaceKB(t *testing.T, s *session) int64 {
	t.Helper()
	r := s.sh("df -k /workspace | tail -n 1", 30)
	f := strings.Fields(r.Output)
	if len(f) < 2 {
		t.Fatalf("df /workspace: %+v", r)
	}
	kb, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("df /workspace: %q: %v", r.Output, err)
	}
	return kb
}

// workspaceFill writes past the workspace cap (capBytes) and checks that
// the write ends in ENOSPC with the file cut at about the cap (the
// filesystem's journal and metadata take the rest).
func workspaceFill(t *testing.T, s *session, capBytes int64) {
	r := s.sh(`dd if=/dev/zero of=/workspace/fill bs=1M count=`+strconv.FormatInt(2*capBytes>>20, 10)+` 2>&1 | grep -v records;`+
		` echo size $(stat -c %s /workspace/fill); rm -f /workspace/fill; df -k /workspace | tail -n 1`, 120)
	t.Logf("workspace fill: %s", strings.TrimSpace(r.Output))
	if !strings.Contains(r.Output, "No space left on device") {
		t.Fatalf("workspace fill: no ENOSPC: %+v", r)
	}
	_, after, _ := strings.Cut(r.Output, "size ")
	f := strings.Fields(after)
	var size int64
	if len(f) > 0 {
		size, _ = strconv.ParseInt(f[0], 10, 64)
	}
	if size < capBytes*3/4 || size > capBytes {
		t.Errorf("the file written was cut at %d bytes, want about the %d-byte cap: %s", size, capBytes, r.Output)
	}
}
