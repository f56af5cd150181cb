package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// testCap is the workspace cap in these tests.
const testCap = 32 << 20

// newCappedEnv is newEnv with a manager that caps workspaces at testCap in
// a temporary folder; it skips unless root (loop devices need it). It fails
// the test, at its end, if an image file or loop device of the folder is
// left.
func newCappedEnv(t *testing.T) (*env, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("capped workspaces need root (loop devices)")
	}
	e := newEnv(t)
	dir := t.TempDir()
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Workspace: sandbox.WorkspaceConfig{Dir: dir, Bytes: testCap}})
	if err != nil {
		t.Fatalf("NewDocker: %v", err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	e.mgr = mgr
	t.Cleanup(func() { assertNoWorkspaceLeft(t, dir) })
	return e, dir
}

// assertNoWorkspaceLeft fails unless dir holds no file and no loop device
// is backed by a file in it.
func assertNoWorkspaceLeft(t *testing.T, dir string) {
	t.Helper()
	if devs, err := sandbox.LoopDevicesUnder(dir); err != nil || len(devs) != 0 {
		t.Errorf("loop devices left: %v (%v)", devs, err)
		for _, d := range devs {
			_ = exec.Command("losetup", "-d", d).Run()
		}
	}
	if left := workspaceFiles(dir); len(left) != 0 {
		t.Errorf("workspace files left: %v", left)
	}
}

// workspaceFiles lists dir but for the spare image formatted ahead for
// the next workspace, ready or still being formatted (workspace_spare.go;
// the manager's Close removes it, TestSpareWorkspaceImage).
func workspaceFiles(dir string) []string {
	all, _ := filepath.Glob(filepath.Join(dir, "*"))
	var out []string
	for _, p := range all {
		if !strings.HasSuffix(p, ".spare") && !strings.HasSuffix(p, ".spare.part") {
			out = append(out, p)
		}
	}
	return out
}

func TestCheckWorkspaces(t *testing.T) {
	e, _ := newCappedEnv(t)
	if err := e.mgr.CheckWorkspaces(e.ctx()); err != nil {
		t.Fatalf("CheckWorkspaces: %v", err)
	}
}

// TestCappedWorkspace fills a capped workspace to ENOSPC, then checks that
// its files survive the loop device being detached (a host reboot) and a
// new sandbox, and that RemoveVolume leaves nothing.
func TestCappedWorkspace(t *testing.T) {
	e, dir := newCappedEnv(t)
	vol := "bwtest-ws-" + randHex(t)
	e.cleanupVolume(vol)
	spec := e.spec()
	spec.WorkspaceVolume = vol
	img := filepath.Join(dir, vol+".img")

	first := e.create(spec)
	out, errOut, code := e.exec(first.ID, "sh", "-c",
		"head -c 64M /dev/zero > /workspace/fill; echo rc=$?; stat -c %s /workspace/fill; echo kept > /workspace/small")
	if !strings.Contains(errOut, "No space left on device") || !strings.HasPrefix(out, "rc=1") {
		t.Fatalf("fill: exit %d, stdout %q, stderr %q; want ENOSPC", code, out, errOut)
	}
	filled, _ := strconv.ParseInt(strings.Fields(out)[1], 10, 64)
	if filled < testCap*3/4 || filled > testCap {
		t.Errorf("filled %d bytes of a %d byte cap", filled, testCap)
	}
	devs, err := sandbox.LoopDevices(img)
	if err != nil || len(devs) != 1 {
		t.Fatalf("loop devices of %s: %v, %v; want one", img, devs, err)
	}
	e.mustExec(first.ID, "rm", "/workspace/fill")

	// A second sandbox on the same volume keeps the loop device when the
	// first goes; when the last goes, so does the device (as at a reboot),
	// and the next Create attaches it again.
	spec.Name = "bwtest-" + randHex(t)
	second := e.create(spec)
	if err := e.mgr.Remove(e.ctx(), first.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got := e.mustExec(second.ID, "cat", "/workspace/small"); got != "kept" {
		t.Errorf("file in the second sandbox = %q, want kept", got)
	}
	if err := e.mgr.Remove(e.ctx(), second.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if devs, err := sandbox.LoopDevices(img); err != nil || len(devs) != 0 {
		t.Errorf("loop devices with no sandbox on the volume: %v, %v; want none", devs, err)
	}
	spec.Name = "bwtest-" + randHex(t)
	third := e.create(spec)
	if got := e.mustExec(third.ID, "cat", "/workspace/small"); got != "kept" {
		t.Errorf("file after re-attach = %q, want kept", got)
	}
	if err := e.mgr.Remove(e.ctx(), third.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := e.mgr.RemoveVolume(e.ctx(), vol); err != nil {
		t.Fatalf("RemoveVolume: %v", err)
	}
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("image after RemoveVolume: %v, want gone", err)
	}
}

// TestCollectWorkspaces removes an image no volume names and keeps one a
// volume names.
func TestCollectWorkspaces(t *testing.T) {
	e, dir := newCappedEnv(t)
	vol := "bwtest-ws-" + randHex(t)
	e.cleanupVolume(vol)
	spec := e.spec()
	spec.WorkspaceVolume = vol
	sb := e.create(spec)
	orphan := filepath.Join(dir, "bwtest-orphan.img")
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := e.mgr.CollectWorkspaces(e.ctx())
	if err != nil || n != 1 {
		t.Errorf("CollectWorkspaces = %d, %v; want 1, nil", n, err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan image: %v, want gone", err)
	}
	if _, err := os.Stat(filepath.Join(dir, vol+".img")); err != nil {
		t.Errorf("image of a live volume: %v", err)
	}
	if err := e.mgr.Remove(e.ctx(), sb.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

// TestCappedCreateCost logs what a capped workspace adds to a cold create:
// the image, mkfs, debugfs and losetup. It asserts nothing about time.
func TestCappedCreateCost(t *testing.T) {
	e, _ := newCappedEnv(t)
	var total time.Duration
	const n = 5
	for range n {
		start := time.Now()
		if err := e.mgr.CheckWorkspaces(e.ctx()); err != nil { // create + remove
			t.Fatalf("CheckWorkspaces: %v", err)
		}
		total += time.Since(start)
	}
	t.Logf("capped workspace make+attach+remove: %v on average over %d", total/n, n)
}

// BenchmarkCreateWithWorkspace times a cold Create (and Remove with its
// volume) of a sandbox with a fresh workspace volume, capped and not: the
// difference is what a capped workspace costs a new thread.
func BenchmarkCreateWithWorkspace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("capped workspaces need root (loop devices)")
	}
	for _, bytes := range []int64{0, 10 << 30} {
		b.Run("cap="+strconv.FormatInt(bytes>>20, 10)+"MiB", func(b *testing.B) {
			mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Workspace: sandbox.WorkspaceConfig{Dir: b.TempDir(), Bytes: bytes}})
			if err != nil {
				b.Fatal(err)
			}
			defer mgr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for i := 0; b.Loop(); i++ {
				vol := "bwbench-ws-" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				sb, err := mgr.Create(ctx, sandbox.Spec{Image: testImage, Cmd: sleepCmd, WorkspaceVolume: vol,
					Labels: map[string]string{testLabel: "1"}})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := mgr.Remove(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
				if err := mgr.RemoveVolume(ctx, vol); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// A Create that fails (no such image; a command that cannot start) leaves
// no volume, image file or loop device (newCappedEnv checks the last two).
func TestCappedFailedCreateLeavesNothing(t *testing.T) {
	e, _ := newCappedEnv(t)
	tests := []struct {
		name string
		edit func(*sandbox.Spec)
	}{
		{"missing image", func(s *sandbox.Spec) { s.Image = "boxwire-missing:" + randHex(t) }},
		{"command that cannot start", func(s *sandbox.Spec) { s.Cmd = []string{"/no/such/command"} }},
	}
	for _, tt := range tests {
		spec := e.spec()
		spec.WorkspaceVolume = "bwtest-ws-" + randHex(t)
		tt.edit(&spec)
		if _, err := e.mgr.Create(e.ctx(), spec); err == nil {
			t.Fatalf("%s: Create succeeded", tt.name)
		}
		if vols, err := e.mgr.ListVolumes(e.ctx(), map[string]string{runLabel: e.run}); err != nil || len(vols) != 0 {
			t.Errorf("%s: volumes after a failed Create: %v, %v", tt.name, vols, err)
		}
	}
}

// The workspaces keep one image formatted ahead: CheckWorkspaces (the
// bridge's start) leaves one, a Create takes it and the next one is
// formatted behind it, the workspace made from it is a working empty
// filesystem of the cap's size, and Close removes the spare. One left by
// a killed bridge is removed by the next CheckWorkspaces.
func TestSpareWorkspaceImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("capped workspaces need root (loop devices)")
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "spare-0badc0ffee00.spare")
	stalePart := filepath.Join(dir, "spare-0badc0ffee01.spare.part")
	for _, p := range []string{stale, stalePart} {
		if err := os.WriteFile(p, []byte("left by a bridge killed"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Workspace: sandbox.WorkspaceConfig{Dir: dir, Bytes: testCap}})
	if err != nil {
		t.Fatalf("NewDocker: %v", err)
	}
	defer mgr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spares := func() []string {
		found, _ := filepath.Glob(filepath.Join(dir, "*.spare"))
		return found
	}
	if err := mgr.CheckWorkspaces(ctx); err != nil {
		t.Fatalf("CheckWorkspaces: %v", err)
	}
	for _, p := range []string{stale, stalePart} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the stale spare %s after CheckWorkspaces: %v, want it removed", p, err)
		}
	}
	awaitOne := func(what string) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if s := spares(); len(s) == 1 {
				return s[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: spares %v, want one", what, spares())
		return ""
	}
	first := awaitOne("after CheckWorkspaces")

	vol := "bwtest-ws-" + randHex(t)
	removed := false
	defer func() { // when the test stopped before its own removal
		if !removed {
			_ = mgr.RemoveVolume(context.Background(), vol)
		}
	}()
	sb, err := mgr.Create(ctx, sandbox.Spec{Image: testImage, Cmd: sleepCmd, WorkspaceVolume: vol,
		Labels: map[string]string{testLabel: "1"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer func() {
		if !removed {
			_ = mgr.Remove(context.Background(), sb.ID)
		}
	}()
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the spare %s after a Create: %v, want it taken", first, err)
	}
	if next := awaitOne("after a Create"); next == first {
		t.Errorf("the next spare has the taken one's name %s", next)
	}
	out, err := exec.CommandContext(ctx, "docker", "exec", sb.ID, "sh", "-c",
		"echo kept > /workspace/kept && cat /workspace/kept && ls -A /workspace && df -k /workspace | tail -1").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kept\nkept\n") {
		t.Fatalf("the workspace made from the spare: %v\n%s", err, out)
	}
	if f := strings.Fields(strings.Split(strings.TrimSpace(string(out)), "\n")[2]); len(f) < 2 || f[1] == "" {
		t.Errorf("df of the workspace: %q", out)
	} else if kb, _ := strconv.ParseInt(f[1], 10, 64); kb <= 0 || kb > testCap>>10 {
		t.Errorf("the workspace made from the spare is %d KiB, want at most the %d KiB cap", kb, testCap>>10)
	}
	if err := mgr.Remove(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := mgr.RemoveVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	removed = true
	if err := mgr.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("after Close: %v, want the folder empty", left)
	}
}
