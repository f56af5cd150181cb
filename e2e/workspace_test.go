package e2e_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// wsCap is the workspace cap in these tests.
const wsCap = 64 << 20

// A capped workspace keeps its files when its sandbox is replaced, and when
// its loop device went away (as after a host reboot) under a restarted
// bridge: the replacement attaches it again. gc leaves no image file or
// loop device.
func TestWorkspaceCapSurvivesReplacement(t *testing.T) {
	e := newEnv(t, helloScript)
	b := e.startBridge("BOXWIRE_WORKSPACE_SIZE=64MiB")
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	// The engine copied the image's /workspace, owner included, into the
	// new filesystem: the sandbox user owns its root.
	if r := s.sh("echo kept > /workspace/kept && stat -c 'owner %u:%g' /workspace", 30); !strings.Contains(r.Output, "owner 1000:1000") {
		t.Fatalf("write to /workspace as the sandbox user: %+v", r)
	}
	if kb := workspaceKB(t, s); kb <= 0 || kb > wsCap>>10 {
		t.Fatalf("/workspace is %d KiB, want at most the %d KiB cap", kb, wsCap>>10)
	}
	if left := e.workspaceLeftovers(); len(left) != 3 { // image, link, loop device
		t.Fatalf("workspace files and devices: %v, want an image, a link and a loop device", left)
	}

	killSandbox(t, e.containerOf(thread))
	s.awaitEvent(wire.TypeSandboxReplaced)
	if r := s.sh("cat /workspace/kept", 30); strings.TrimSpace(r.Output) != "kept" {
		t.Fatalf("after replacement: %+v", r)
	}

	// The bridge dies; the loop device is detached (it goes at unmount, as
	// at a reboot); a new bridge adopts the sandbox, and its replacement
	// attaches the image again.
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	s.conn.Close()
	old := e.detachLoops()
	e.startBridge("BOXWIRE_WORKSPACE_SIZE=64MiB")
	s2 := e.dial(thread)
	adopted := e.containerOf(thread)
	killSandbox(t, adopted)
	for { // the log replays the first replacement: wait for the new one
		var rep wire.SandboxReplaced
		mustDecode(t, s2.awaitEvent(wire.TypeSandboxReplaced), &rep)
		if !strings.HasPrefix(adopted, rep.SandboxID) {
			break
		}
	}
	if r := s2.sh("cat /workspace/kept", 30); strings.TrimSpace(r.Output) != "kept" {
		t.Fatalf("after re-attach: %+v", r)
	}
	t.Logf("loop devices before the restart %v, after %v", old, e.workspaceLeftovers())
}

// Without loop devices (here: no losetup or mkfs.ext4 on PATH) a capped
// bridge refuses to start, naming the flag; --workspace-size 0 starts with
// an uncapped workspace.
func TestWorkspaceCapNeedsLoopDevices(t *testing.T) {
	e := newEnv(t, helloScript)
	b, err := e.launchBridge("BOXWIRE_WORKSPACE_SIZE=64MiB", "PATH=/nonexistent")
	if err == nil {
		b.stop(t)
		t.Fatal("a capped bridge without losetup and mkfs.ext4 started")
	}
	if !strings.Contains(err.Error(), "--workspace-size") {
		t.Errorf("start-up error does not name --workspace-size:\n%v", err)
	}

	e.startBridge("BOXWIRE_WORKSPACE_SIZE=0")
	e.cleanAtEnd()
	s := e.dial("")
	if kb := workspaceKB(t, s); kb <= wsCap>>10 {
		t.Errorf("uncapped /workspace is %d KiB", kb)
	}
	if left := e.workspaceLeftovers(); len(left) != 0 {
		t.Errorf("an uncapped workspace made %v", left)
	}
}
