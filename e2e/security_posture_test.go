package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// TestSecurityPostureRefused runs a bridge whose seccomp profile file says
// "unconfined": its sandboxes start without a filter, which the strict
// posture check (the default) must refuse with sandbox_unavailable, and
// the refused sandbox must be removed.
func TestSecurityPostureRefused(t *testing.T) {
	e := newEnv(t, helloScript)
	profile := filepath.Join(e.dataDir, "seccomp.json")
	if err := os.WriteFile(profile, []byte("unconfined"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startBridge("BOXWIRE_SECCOMP=" + profile)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token})
	if err == nil {
		conn.Close()
		t.Fatal("a sandbox without seccomp was accepted")
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), string(wire.CodeSandboxUnavailable)) || !strings.Contains(err.Error(), "seccomp mode 0") {
		t.Errorf("error %v: want sandbox_unavailable naming seccomp mode 0", err)
	}
	if boxes := e.containers(nil); len(boxes) != 0 {
		t.Errorf("%d refused sandboxes left: %+v", len(boxes), boxes)
	}
	if !strings.Contains(e.bridge.logText(), "sandbox posture refused") {
		t.Errorf("the refusal was not logged")
	}
}
