package kube_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// labelPooled marks a warm pool's sandbox (bridge/fleet/pool.go).
const labelPooled = "boxwire.pool"

// The warm pool is pods made before any thread asks: a new thread takes
// one of them (no pod is created for it) and the pool makes another.
func TestKubeWarmPool(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--pool", "2")
	waitFor(t, "two pooled sandboxes ready", func() bool {
		return strings.Count(e.logText(), "warm pool: sandbox ready") >= 2
	})
	pooled := e.ownerPods(map[string]string{labelPooled: "1"})
	if len(pooled) != 2 {
		t.Fatalf("pooled pods %v, want 2", pooled)
	}
	began := time.Now()
	s := e.dial("")
	took := time.Since(began)
	info := e.threadInfo(s.conn.Thread())
	if !slices.Contains(pooled, info.SandboxID) {
		t.Fatalf("the new thread runs in %q, not in a pooled pod %v", info.SandboxID, pooled)
	}
	t.Logf("a new thread from the pool in %v", took)
	// The claimed pod keeps its pool label (labels are set at creation);
	// the pool holds the two others.
	waitFor(t, "the pool refilled", func() bool {
		now := e.ownerPods(map[string]string{labelPooled: "1"})
		return len(now) == 3 && slices.Contains(now, info.SandboxID)
	})
	s.turnShows("write a file", "hello from the pod")
}

// An idle thread is suspended: its pod is deleted, its claim kept; a
// client attaching again resumes it in a new pod on the same claim, with
// the file the last turn wrote.
func TestKubeIdleSuspendAndResume(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--idle-ttl", "4s", "--reap-interval", "200ms")
	s := e.dial("")
	thread := s.conn.Thread()
	s.turnStops("write a file")
	old := threadPod(t, thread)
	s.conn.Close()
	waitFor(t, "the thread suspended, its pod gone", func() bool {
		return e.threadInfo(thread).Status == wire.SandboxSuspended &&
			len(e.ownerPods(map[string]string{sandbox.LabelThread: thread})) == 0
	})
	if _, claims, _ := objectsOf(t, e.id); claims != 1 {
		t.Fatalf("%d claims of the suspended thread, want its workspace's 1", claims)
	}
	s = e.dial(thread)
	s.replacedBy(wire.ExitIdle)
	s.turnShows("read it back", "hello from the pod")
	if now := threadPod(t, thread); now.UID == old.UID {
		t.Error("the resumed thread runs in the old pod")
	}
}

// A thread suspended and resumed while a client keeps asking for its info
// (GET /v1/threads/{id} asks the API server whether its pod runs): each
// resume reaches its agent. Once, such an Inspect between the suspension's
// end of the tunnel and its delete of the pod started a tunnel for the
// old pod again, under the name the resumed pod takes, and the resumed
// pod got none (CI: "agent not ready ... agent.sock: no such file").
func TestKubeResumeWhileInfoIsPolled(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--idle-ttl", "2s", "--reap-interval", "100ms")
	s := e.dial("")
	thread := s.conn.Thread()
	s.turnStops("write a file")
	ctx, cancel := context.WithCancel(context.Background())
	var polls atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := chat.GetThread(ctx, chat.Config{URL: e.bridge, Token: e.token}, thread); err == nil {
					polls.Add(1)
				}
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	const rounds = 4
	for round := range rounds {
		s.conn.Close()
		waitFor(t, "the thread suspended", func() bool {
			return e.threadInfo(thread).Status == wire.SandboxSuspended
		})
		s = e.dial(thread)
		s.replacedBy(wire.ExitIdle)
		s.turnShows("read it back", "hello from the pod")
		t.Logf("round %d of %d: resumed; %d infos answered so far", round+1, rounds, polls.Load())
	}
}

// A pod past --max-lifetime is replaced (recycled) on the same claim when
// its thread is idle: sandbox_exited and sandbox_replaced say lifetime,
// and the next turn finds the workspace as it was.
func TestKubeRecycleByLifetime(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--max-lifetime", "15s", "--reap-interval", "200ms")
	s := e.dial("")
	thread := s.conn.Thread()
	old := threadPod(t, thread)
	s.turnStops("write a file")
	s.replacedBy(wire.ExitLifetime)
	now := threadPod(t, thread)
	if now.UID == old.UID {
		t.Fatal("the pod was not replaced")
	}
	if _, ok := old.Annotations[sandbox.LabelExpires]; !ok {
		t.Errorf("the pod has no %s annotation: %v", sandbox.LabelExpires, old.Annotations)
	}
	s.turnShows("read it back", "hello from the pod")
}

// --max-sandboxes bounds the pods: a thread past it is refused with
// sandbox_limit (429) and makes no pod or claim; once the first thread is
// deleted, a new one runs.
func TestKubeMaxSandboxes(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--max-sandboxes", "1")
	var first wire.ThreadInfo
	if code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{}, &first); code != http.StatusCreated {
		t.Fatalf("first thread: %d %+v", code, first)
	}
	var refused apiError
	if code := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{}, &refused); code != http.StatusTooManyRequests || refused.Error.Code != wire.CodeSandboxLimit {
		t.Fatalf("second thread: %d %+v, want 429 sandbox_limit", code, refused.Error)
	}
	if p, c, _ := objectsOf(t, e.id); p != 1 || c != 1 {
		t.Fatalf("%d pods and %d claims, want the first thread's 1 and 1", p, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := chat.DeleteThread(ctx, chat.Config{URL: e.bridge, Token: e.token}, first.ID); err != nil {
		t.Fatalf("delete thread: %v", err)
	}
	if _, done := e.dial("").turn("write a file"); done.Reason != wire.ReasonStop {
		t.Fatalf("a thread after the first was deleted: turn ended with %q", done.Reason)
	}
}

// bridge gc for the namespace removes everything of the bridge id that a
// crashed bridge left: a thread's pod (its finalizer included) and claim,
// the warm pool's pod and claim, and the claims' volumes go.
func TestKubeGCRemovesTheBridgesObjects(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--pool", "1")
	s := e.dial("")
	s.turnStops("write a file")
	waitFor(t, "a pooled pod", func() bool { return len(e.ownerPods(map[string]string{labelPooled: "1"})) == 1 })
	pod := threadPod(t, s.conn.Thread())
	s.conn.Close()
	e.killBridge() // a stop would remove the pool's pod itself
	if p, c, _ := objectsOf(t, e.id); p != 2 || c != 2 {
		t.Fatalf("after the bridge was killed: %d pods, %d claims; want 2 of each (thread, pool)", p, c)
	}
	var claims []string
	for _, name := range e.ownerPods(nil) {
		for _, v := range podNamed(t, name).Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	if !hasFinalizer(pod) {
		t.Errorf("the thread's pod has no finalizer: %v", pod.Finalizers)
	}
	e.collect()
	if p, c, m := objectsOf(t, e.id); p+c+m != 0 {
		t.Fatalf("after bridge gc: %d pods, %d claims, %d configmaps", p, c, m)
	}
	if len(claims) != 2 {
		t.Fatalf("the pods mount claims %v, want 2", claims)
	}
	for _, c := range claims {
		waitFor(t, "the claim's volume deleted", func() bool { return !volumeOfClaim(t, c) })
	}
}

// podNamed is the suite namespace's pod name.
func podNamed(t *testing.T, name string) corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

// A command that allocates past a small memory limit is killed by the
// OOM killer inside the pod (exit 137, as on Docker: the agent makes its
// commands the OOM killer's first choice), and the sandbox goes on: the
// same pod takes the next turn.
func TestKubeCommandOutOfMemory(t *testing.T) {
	const hog = `{"model":"scripted","turns":[
  {"when":"hog","steps":[
    {"content":"Allocating.","tool_calls":[{"name":"execute","arguments":{"command":"python3 -c 'x = []\nwhile True: x.append(bytearray(16 << 20))'","timeout":60}}]},
    {"content":"Done."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`
	e := newEnv(t, hog)
	e.startBridge("--memory", "134217728")
	s := e.dial("")
	pod := threadPod(t, s.conn.Thread())
	if lim := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; lim.Value() != 128<<20 {
		t.Fatalf("memory limit %s, want 128Mi", lim.String())
	}
	events, done := s.turn("hog memory")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	_, res := toolOutput(t, events)
	t.Logf("the hog's result: exit %d, status %q, error %q", exitCode(res), res.Status, res.Error)
	if exitCode(res) != 137 {
		t.Fatalf("the hog's result %+v, want exit 137 (SIGKILL by the OOM killer)", res)
	}
	for _, ev := range events {
		if ev.Type == wire.TypeSandboxExited {
			t.Fatalf("the sandbox stopped: %s", ev.Data)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || p.UID != pod.UID || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the pod after the hog: %v %v", p.Status.Phase, err)
	}
	if _, d := s.turn("hello again"); d.Reason != wire.ReasonStop {
		t.Errorf("the next turn ended with %q", d.Reason)
	}
}

// exitCode is r's exit code, or -1 when it has none.
func exitCode(r wire.ToolResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// hasFinalizer says whether p carries the manager's finalizer.
func hasFinalizer(p corev1.Pod) bool {
	return slices.Contains(p.Finalizers, "boxwire.io/sandbox")
}

// A command that fills the pod's memory with what no process holds (files
// in the memory-backed /tmp, past the memory limit) leaves the OOM killer
// nothing to free but the agent: the kubelet reports the container
// OOMKilled, and the client gets it as a clear error — sandbox_exited oom
// "killed for running out of memory", the turn ended sandbox_lost — and a
// replacement pod on the same claim.
func TestKubePodOOMKilled(t *testing.T) {
	const fill = `{"model":"scripted","turns":[
  {"when":"fill","steps":[
    {"content":"Filling.","tool_calls":[{"name":"execute","arguments":{"command":"for i in $(seq 1 40); do head -c 8M /dev/zero > /tmp/f$i || break; done; echo filled","timeout":60}}]},
    {"content":"Done."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`
	e := newEnv(t, fill)
	e.startBridge("--memory", "134217728", "--tmpfs", "268435456")
	s := e.dial("")
	thread := s.conn.Thread()
	old := threadPod(t, thread)
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	id, err := s.conn.SendMessage(ctx, "fill the memory")
	if err != nil {
		t.Fatal(err)
	}
	// Run would skip sandbox_exited and sandbox_replaced (they are no
	// turn's): read the events until all three came.
	var exit wire.SandboxExited
	var result wire.ToolResult
	var done wire.TurnDone
	seen := map[wire.Type]bool{}
	for !seen[wire.TypeSandboxExited] || !seen[wire.TypeTurnDone] || !seen[wire.TypeSandboxReplaced] {
		var ev wire.Envelope
		select {
		case ev = <-s.conn.Events():
		case <-ctx.Done():
			t.Fatalf("events seen %v: not all of sandbox_exited, turn_done, sandbox_replaced within %v", seen, turnTimeout)
		}
		switch {
		case ev.Type == wire.TypeSandboxExited:
			err = ev.Decode(&exit)
		case ev.Type == wire.TypeToolResult && ev.ID == id:
			err = ev.Decode(&result)
		case ev.Type == wire.TypeTurnDone && ev.ID == id:
			err = ev.Decode(&done)
		case ev.Type != wire.TypeSandboxReplaced:
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[ev.Type] = true
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	t.Logf("sandbox_exited %s, exit code %d, oom_killed %v, %q; tool_result %s %q; turn_done %s",
		exit.Reason, code, exit.OOMKilled, exit.Message, result.Status, result.Error, done.Reason)
	if exit.Reason != wire.ExitOOM || !exit.OOMKilled || !strings.Contains(exit.Message, "killed for running out of memory") {
		t.Fatalf("sandbox_exited %+v, want oom with the kubelet's OOMKilled", exit)
	}
	if done.Reason != wire.ReasonSandboxLost || !strings.Contains(result.Error, "out of memory") {
		t.Errorf("turn_done %s, tool_result %q: want sandbox_lost saying out of memory", done.Reason, result.Error)
	}
	if now := threadPod(t, thread); now.UID == old.UID {
		t.Error("the pod was not replaced")
	}
}
