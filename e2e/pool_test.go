package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The warm pool on the real engine: a thread (POST /v1/threads and a hello
// without a thread) takes a pooled sandbox that holds no thread's label or
// token, a turn with execute works in it, the pool refills, and nothing is
// left after gc.
func TestPoolThreadFromWarmPool(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_POOL=1")
	e.cleanAtEnd()
	awaitPoolReady(t, e, 1)
	pooled := e.containers(map[string]string{"boxwire.pool": "1"})
	if len(pooled) != 1 || pooled[0].Labels["boxwire.thread"] != "" {
		t.Fatalf("pooled containers %+v", pooled)
	}
	if env := dockerExec(t, pooled[0].ID, "sh", "-c", "env | grep -c BOXWIRE_LLM_TOKEN || true"); strings.TrimSpace(env) != "0" {
		t.Errorf("pooled sandbox has an LLM token in its environment")
	}

	start := time.Now()
	info := e.createThread(wire.CreateThread{})
	t.Logf("POST /v1/threads from the warm pool: ready in %v", time.Since(start))
	if info.SandboxID != pooled[0].ID {
		t.Fatalf("thread %s runs in %s, not the pooled %s", info.ID, info.SandboxID, pooled[0].ID)
	}
	s := e.dial(info.ID)
	if _, done := s.turn("hello, please write a file"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	if out := dockerExec(t, info.SandboxID, "cat", "/workspace/x"); strings.TrimSpace(out) != "hello" {
		t.Errorf("workspace file: %q", out)
	}

	awaitPoolReady(t, e, 2) // refilled
	start = time.Now()
	s2 := e.dial("")
	t.Logf("hello without a thread from the warm pool: ready in %v", time.Since(start))
	if _, done := s2.turn("hello again"); done.Reason != wire.ReasonStop {
		t.Fatalf("second turn ended with %q", done.Reason)
	}
}

// The pool counts toward --max-sandboxes on the real engine: a shared
// sandbox made when pooled + live are at the limit evicts the pooled one
// (removed before the new one starts), the next is refused with 429, and
// the pool does not refill past the limit.
func TestPoolCountsTowardMaxSandboxes(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_POOL=1", "BOXWIRE_MAX_SANDBOXES=2")
	e.cleanAtEnd()
	awaitPoolReady(t, e, 1)
	pooled := e.containers(map[string]string{"boxwire.pool": "1"})
	if len(pooled) != 1 {
		t.Fatalf("%d pooled sandboxes, want 1", len(pooled))
	}
	e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "a"})
	e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "b"})
	if left := e.containers(map[string]string{"boxwire.pool": "1"}); len(left) != 0 {
		t.Errorf("pooled sandbox not evicted for the second shared sandbox: %+v", left)
	}
	var refused apiError
	code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "c"}, &refused)
	if code != http.StatusTooManyRequests || refused.Error.Code != wire.CodeSandboxLimit {
		t.Fatalf("third shared sandbox: %d %+v, want 429 sandbox_limit", code, refused.Error)
	}
	if n := len(e.containers(nil)); n != 2 {
		t.Errorf("%d sandboxes, want the limit 2", n)
	}
	if !strings.Contains(e.bridge.logText(), "room for a new sandbox under --max-sandboxes") {
		t.Errorf("bridge did not log the eviction")
	}
}
