package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The client's new-thread flags create the thread through the bridge's
// threads API before attaching: the thread gets the asked ttl and egress
// rules; rules the operator did not allow are refused with the bridge's
// reason and nothing is created; --thread with a new-thread flag is a
// usage error.
func TestClientCreatesThreadWithSettings(t *testing.T) {
	e := newEnv(t, sleepScript)
	const allowed = "127.0.0.1:9" // never dialled: only the rule matters
	e.startBridge("BOXWIRE_EGRESS_THREAD_MAX=" + allowed)
	e.cleanAtEnd()

	start := time.Now()
	out, errOut, code := e.runClient("--url", e.bridge.url, "--json", "--ttl", "5m", "--egress", allowed, "-m", "hello")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	envs := jsonLines(t, out)
	if len(envs) == 0 || envs[len(envs)-1].Type != wire.TypeTurnDone {
		t.Fatalf("no turn_done in %s", out)
	}
	var list wire.ThreadList
	if status := e.api(http.MethodGet, "/v1/threads", nil, &list); status != http.StatusOK || len(list.Threads) != 1 {
		t.Fatalf("threads: status %d, %+v", status, list)
	}
	info := list.Threads[0]
	if info.ID != envs[0].Thread {
		t.Errorf("thread %s, events of %s", info.ID, envs[0].Thread)
	}
	if len(info.Egress) != 1 || !strings.Contains(info.Egress[0], "127.0.0.1") {
		t.Errorf("thread egress %v, want [%s]", info.Egress, allowed)
	}
	if idle := info.IdleExpires.Sub(start); idle <= 0 || idle > 6*time.Minute {
		t.Errorf("idle expiry %v after the start, want about 5m", idle)
	}

	_, errOut, code = e.runClient("--url", e.bridge.url, "--egress", "example.com", "-m", "hello")
	if code != 2 || !strings.Contains(errOut, string(wire.CodeNotAllowed)) {
		t.Errorf("egress outside the cap: exit %d, stderr %q; want 2 and %s", code, errOut, wire.CodeNotAllowed)
	}
	// (--image alone moves an existing thread: TestClientMovesThreadImage.)
	_, errOut, code = e.runClient("--url", e.bridge.url, "--thread", info.ID, "--ttl", "5m", "-m", "hello")
	if code != 2 || !strings.Contains(errOut, "--thread") {
		t.Errorf("--thread with --ttl: exit %d, stderr %q; want a usage error", code, errOut)
	}
	if status := e.api(http.MethodGet, "/v1/threads", nil, &list); status != http.StatusOK || len(list.Threads) != 1 {
		t.Errorf("after the refusals: status %d, %d threads, want the first one only", status, len(list.Threads))
	}
}
