package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// kill -9 of the bridge after a thread took a pooled sandbox and ran a
// turn in it; a restart adopts that sandbox (same container, workspace,
// the thread's own ttl) and the thread goes on; the unclaimed pooled
// sandbox the killed bridge refilled is removed with its volume and
// folder; SIGTERM then removes only the new bridge's unclaimed pool.
func TestPoolClaimedSandboxSurvivesBridgeKill(t *testing.T) {
	e := newEnv(t, helloScript)
	b := e.startBridge("BOXWIRE_POOL=1")
	e.cleanAtEnd()
	awaitPoolReady(t, e, 1)
	info := e.createThread(wire.CreateThread{TTL: "7m"})
	pooled := e.containers(map[string]string{"boxwire.pool": "1"})
	if len(pooled) != 1 || info.SandboxID != pooled[0].ID {
		t.Fatalf("thread %s runs in %s; pooled %+v", info.ID, info.SandboxID, pooled)
	}
	s := e.dial(info.ID)
	if _, done := s.turn("hello, please write a file"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	awaitPoolReady(t, e, 2)
	var spare sandbox.Sandbox
	for _, sb := range e.containers(map[string]string{"boxwire.pool": "1"}) {
		if sb.ID != info.SandboxID {
			spare = sb
		}
	}
	spareBox := spare.Labels["boxwire.box"]
	if spareBox == "" {
		t.Fatalf("the pool did not refill with a labelled sandbox: %+v", spare)
	}
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	s.conn.Close()

	start := time.Now()
	e.startBridge("BOXWIRE_POOL=1")
	t.Logf("restart with adoption: listening after %v", time.Since(start))
	if len(e.containers(map[string]string{"boxwire.box": spareBox})) != 0 {
		t.Errorf("the unclaimed pooled sandbox of the killed bridge is still there")
	}
	spareVol := "boxwire-ws-" + spareBox
	if slices.Contains(e.volumes(), spareVol) {
		t.Errorf("volume %s of the unclaimed pooled sandbox left", spareVol)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "run", spareBox)); err == nil {
		t.Errorf("socket folder of the unclaimed pooled sandbox left")
	}
	var got wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+info.ID, nil, &got); code != http.StatusOK {
		t.Fatalf("thread after restart: %d\n%s", code, e.bridge.logText())
	}
	if got.SandboxID != info.SandboxID {
		t.Fatalf("after restart the thread runs in %s, want the adopted %s", got.SandboxID, info.SandboxID)
	}
	if idle := time.Until(got.IdleExpires); idle > 8*time.Minute {
		t.Errorf("idle expiry in %v after adoption, want the thread's own ttl of 7m", idle)
	}
	s2 := e.dial(info.ID)
	if _, done := s2.turn("anything"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after restart ended %q", done.Reason)
	}
	if out := dockerExec(t, info.SandboxID, "cat", "/workspace/x"); strings.TrimSpace(out) != "hello" {
		t.Errorf("workspace file after restart: %q", out)
	}

	awaitPoolReady(t, e, 1) // the new bridge's own pool
	e.bridge.stop(t)
	left := e.containers(nil)
	if len(left) != 1 || left[0].ID != info.SandboxID {
		t.Errorf("after SIGTERM %d sandboxes left, want only the thread's %s", len(left), info.SandboxID)
	}
}
