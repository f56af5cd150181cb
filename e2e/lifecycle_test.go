package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Thread scope through the threads API: create, list, get, attach over the
// WebSocket, delete; nothing is left.
func TestThreadsAPIThreadScope(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	e.cleanAtEnd()
	info := e.createThread(wire.CreateThread{})
	if info.Scope != wire.ScopeThread || info.Status != wire.SandboxRunning || info.Image != image ||
		info.Expires.Before(info.Created) || info.SandboxID == "" {
		t.Fatalf("created %+v", info)
	}
	var list wire.ThreadList
	if code := e.api(http.MethodGet, "/v1/threads", nil, &list); code != http.StatusOK || len(list.Threads) != 1 || list.Threads[0].ID != info.ID {
		t.Fatalf("list: %d %+v", code, list)
	}
	boxes := e.containers(map[string]string{"boxwire.thread": info.ID, "boxwire.scope": "thread"})
	if len(boxes) != 1 || boxes[0].ID != info.SandboxID {
		t.Fatalf("containers for %s: %+v", info.ID, boxes)
	}
	for _, l := range []string{"boxwire.owner", "boxwire.created", "boxwire.expires"} {
		if boxes[0].Labels[l] == "" {
			t.Errorf("container label %s missing: %v", l, boxes[0].Labels)
		}
	}
	if v := e.volumes(); len(v) != 1 {
		t.Errorf("labelled volumes %v, want 1", v)
	}
	s := e.dial(info.ID)
	if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	var got wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+info.ID, nil, &got); code != http.StatusOK || got.Clients != 1 {
		t.Fatalf("get: %d %+v", code, got)
	}
	if code := e.api(http.MethodDelete, "/v1/threads/"+info.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code := e.api(http.MethodGet, "/v1/threads/"+info.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("get after delete: %d", code)
	}
	e.assertClean()
}

// Two threads of one assistant share one sandbox (and its workspace); the
// sandbox outlives both threads until gc.
func TestAssistantScopeSharedByTwoThreads(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	e.cleanAtEnd()
	a := e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-1"})
	b := e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-1"})
	if a.ID == b.ID || a.SandboxID != b.SandboxID {
		t.Fatalf("threads %s and %s: sandboxes %s and %s, want one shared", a.ID, b.ID, a.SandboxID, b.SandboxID)
	}
	boxes := e.containers(map[string]string{"boxwire.assistant": "helper-1", "boxwire.scope": "assistant"})
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes for the assistant, want 1", len(boxes))
	}
	// Thread a writes a file; thread b's sandbox sees it.
	if _, done := e.dial(a.ID).turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	if got := dockerExec(t, b.SandboxID, "cat", "/workspace/x"); got != "hello\n" {
		t.Fatalf("/workspace/x = %q", got)
	}
	if _, done := e.dial(b.ID).turn("anything"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn in b ended %q", done.Reason)
	}
	for _, id := range []string{a.ID, b.ID} {
		if code := e.api(http.MethodDelete, "/v1/threads/"+id, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete %s: %d", id, code)
		}
	}
	if n := len(e.containers(nil)); n != 1 {
		t.Fatalf("%d sandboxes after deleting both threads, want the shared one", n)
	}
}

// The maximum lifetime recycles a sandbox in use — a new container for the
// same thread, its client told why — and the idle TTL suspends a thread
// nobody uses: no container, the thread and its workspace volume kept
// (docs/lifecycle.md; continuity_test.go resumes them).
func TestTTLExpiry(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_MAX_LIFETIME=8s", "BOXWIRE_REAP_INTERVAL=200ms")
	e.cleanAtEnd()
	idle := e.createThread(wire.CreateThread{TTL: "2s"})
	s := e.dial("")
	old := e.containerOf(s.conn.Thread())
	ev := s.awaitEvent(wire.TypeSandboxExited)
	var exit wire.SandboxExited
	mustDecode(t, ev, &exit)
	if exit.Reason != wire.ExitLifetime || exit.ExitCode != nil {
		t.Fatalf("sandbox_exited %+v, want max_lifetime", exit)
	}
	var rep wire.SandboxReplaced
	mustDecode(t, s.awaitEvent(wire.TypeSandboxReplaced), &rep)
	if rep.Reason != wire.ExitLifetime || rep.SandboxID == "" {
		t.Fatalf("sandbox_replaced %+v, want max_lifetime", rep)
	}
	if len(e.containers(map[string]string{"boxwire.thread": idle.ID})) != 0 {
		t.Errorf("the idle thread's sandbox (ttl 2s) is still there after 8s")
	}
	var info wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+idle.ID, nil, &info); code != http.StatusOK || info.Status != wire.SandboxSuspended {
		t.Errorf("idle thread: %d %+v, want suspended", code, info)
	}
	if code := e.api(http.MethodGet, "/v1/threads/"+s.conn.Thread(), nil, &info); code != http.StatusOK || info.Status != wire.SandboxRunning || info.SandboxID == old {
		t.Errorf("recycled thread: %d %+v, want running in a new sandbox", code, info)
	}
}

// kill -9 of the bridge, then a restart: the new bridge adopts the sandbox
// and the thread goes on in it.
func TestBridgeKilledThenRestartedAdoptsSandbox(t *testing.T) {
	e := newEnv(t, helloScript)
	b := e.startBridge()
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	before := e.containers(nil)
	if len(before) != 1 {
		t.Fatalf("%d sandboxes, want 1", len(before))
	}
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	s.conn.Close()

	e.startBridge()
	after := e.containers(nil)
	if len(after) != 1 || after[0].ID != before[0].ID {
		t.Fatalf("after restart: %+v, want the same sandbox %s", after, before[0].ID)
	}
	s2 := e.dial(thread)
	if _, done := s2.turn("anything"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after restart ended %q", done.Reason)
	}
	if got := dockerExec(t, after[0].ID, "cat", "/workspace/x"); got != "hello\n" {
		t.Fatalf("/workspace/x = %q", got)
	}
}

// A sandbox's container shows every hardening setting, and the syscalls
// our seccomp profile denies fail inside it.
func TestSandboxIsHardened(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	e.cleanAtEnd()
	info := e.createThread(wire.CreateThread{})
	c := dockerInspect(t, info.SandboxID)
	hc := c["HostConfig"].(map[string]any)
	cfg := c["Config"].(map[string]any)
	str := func(v any) string {
		if f, ok := v.(float64); ok {
			return fmt.Sprintf("%.0f", f)
		}
		return fmt.Sprint(v)
	}
	checks := map[string][2]string{
		"user":          {str(cfg["User"]), "1000:1000"},
		"network":       {str(hc["NetworkMode"]), "none"},
		"cap drop":      {str(hc["CapDrop"]), "[ALL]"},
		"read-only":     {str(hc["ReadonlyRootfs"]), "true"},
		"pids":          {str(hc["PidsLimit"]), "512"},
		"memory":        {str(hc["Memory"]), fmt.Sprint(2 << 30)},
		"swap":          {str(hc["MemorySwap"]), fmt.Sprint(2 << 30)},
		"cpus":          {str(hc["NanoCpus"]), "1000000000"},
		"tmpfs":         {str(hc["Tmpfs"].(map[string]any)["/tmp"]), "rw,nosuid,nodev,mode=1777,size=268435456"},
		"init (tini)":   {str(c["Path"]), "/usr/bin/tini"},
		"engine --init": {str(hc["Init"]), "false"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: %s, want %s", name, c[0], c[1])
		}
	}
	secopts := str(hc["SecurityOpt"])
	if !strings.Contains(secopts, "no-new-privileges") || !strings.Contains(secopts, "seccomp=") || !strings.Contains(secopts, "io_uring_setup") {
		t.Errorf("security options lack no-new-privileges or our seccomp profile")
	}
	// Each denied syscall fails with EPERM; perl's syscall() reports errno.
	// x86_64 numbers.
	denied := map[string]int{"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
		"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "personality": 135,
		"userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
		"perf_event_open": 298, "unshare": 272, "setns": 308, "mount": 165}
	for name, nr := range denied {
		out := dockerExec(t, info.SandboxID, "perl", "-e", fmt.Sprintf(`$r = syscall(%d, 0, 0, 0, 0, 0); print "$r ", $!+0, "\n"`, nr))
		if strings.TrimSpace(out) != fmt.Sprintf("-1 %d", syscall.EPERM) {
			t.Errorf("%s from inside: %q, want -1 EPERM", name, strings.TrimSpace(out))
		}
	}
	// Ordinary work still runs: a file write and a process.
	dockerExec(t, info.SandboxID, "sh", "-c", "echo ok > /workspace/ok && cat /workspace/ok")
	status := dockerExec(t, info.SandboxID, "cat", "/proc/self/status")
	if !strings.Contains(status, "NoNewPrivs:\t1") || !strings.Contains(status, "Seccomp:\t2") {
		t.Errorf("/proc/self/status lacks NoNewPrivs 1 / Seccomp 2:\n%s", status)
	}
}

// A container that dies becomes a sandbox_exited event with its exit code.
func TestSandboxDeathIsAnEvent(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	e.cleanAtEnd()
	s := e.dial("")
	box := e.containers(map[string]string{"boxwire.thread": s.conn.Thread()})[0]
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "kill", "-s", "KILL", box.ID).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	var exit wire.SandboxExited
	mustDecode(t, s.awaitEvent(wire.TypeSandboxExited), &exit)
	if exit.ExitCode == nil || *exit.ExitCode != 137 || exit.Reason != wire.ExitOOM || !strings.Contains(exit.Message, "137") {
		t.Fatalf("sandbox_exited %+v, want exit 137 (reported as a likely OOM kill)", exit)
	}
	// The bridge then replaces it (docs/store.md).
	s.awaitEvent(wire.TypeSandboxReplaced)
	var info wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+s.conn.Thread(), nil, &info); code != http.StatusOK || info.Status != wire.SandboxRunning || info.SandboxID == box.ID {
		t.Fatalf("get: %d %+v", code, info)
	}
}

// Limits: a second sandbox past the maximum is a clear error and nothing
// is half-created; an image outside the allowlist is refused.
func TestSandboxLimitAndImageAllowlist(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_MAX_SANDBOXES=1")
	e.cleanAtEnd()
	e.createThread(wire.CreateThread{})
	var body apiError
	if code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{}, &body); code != http.StatusTooManyRequests || body.Error.Code != wire.CodeSandboxLimit {
		t.Fatalf("second thread: %d %+v", code, body)
	}
	if code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{Image: "debian:evil"}, &body); code != http.StatusBadRequest || body.Error.Code != wire.CodeNotAllowed {
		t.Fatalf("image outside the allowlist: %d %+v", code, body)
	}
	if n, v := len(e.containers(nil)), len(e.volumes()); n != 1 || v != 1 {
		t.Fatalf("%d containers and %d volumes, want 1 of each", n, v)
	}
}

// An engine that goes away gives engine_unavailable errors, over HTTP and
// the WebSocket; when it is back, the bridge creates sandboxes again.
func TestEngineOutageAndRecovery(t *testing.T) {
	e := newEnv(t, helloScript)
	proxy := newEngineProxy(t)
	e.startBridge("DOCKER_HOST=" + proxy.host())
	e.cleanAtEnd()
	e.createThread(wire.CreateThread{})

	proxy.cut()
	var body apiError
	if code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{}, &body); code != http.StatusServiceUnavailable || body.Error.Code != wire.CodeEngineUnavailable {
		t.Fatalf("create while the engine is away: %d %+v", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token})
	if err == nil || !strings.Contains(err.Error(), string(wire.CodeEngineUnavailable)) {
		t.Fatalf("dial while the engine is away: %v, want engine_unavailable", err)
	}

	proxy.restore(t)
	info := e.createThread(wire.CreateThread{})
	if _, done := e.dial(info.ID).turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after recovery ended %q", done.Reason)
	}
}

// A thread works under gVisor's runsc (installed and registered with the
// engine by the test itself).
func TestThreadUnderRunsc(t *testing.T) {
	ensureRunsc(t)
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_RUNTIMES=runsc")
	e.cleanAtEnd()
	info := e.createThread(wire.CreateThread{Runtime: "runsc"})
	if info.Runtime != "runsc" {
		t.Fatalf("runtime %q", info.Runtime)
	}
	if _, done := e.dial(info.ID).turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn under runsc ended %q", done.Reason)
	}
	if got := dockerExec(t, info.SandboxID, "cat", "/workspace/x"); got != "hello\n" {
		t.Fatalf("/workspace/x = %q", got)
	}
}
