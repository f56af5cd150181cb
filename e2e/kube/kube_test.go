package kube_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

const writeScript = `{"model":"scripted","turns":[
  {"when":"write","steps":[
    {"content":"Writing.","tool_calls":[{"name":"execute","arguments":{"command":"echo hello from the pod > /workspace/x && cat /workspace/x"}}]},
    {"content":"Done: /workspace/x says hello."}
  ]},
  {"when":"read","steps":[
    {"content":"Reading.","tool_calls":[{"name":"execute","arguments":{"command":"cat /workspace/x"}}]},
    {"content":"Read it."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`

// A thread on Kubernetes: the turn runs in a pod, the model's execute
// writes to the pod's workspace, the model is reached through the bridge's
// proxy over the relay (the key added there, never in the pod), and
// deleting the thread leaves nothing in the namespace.
func TestKubeThreadRunsTurnInPod(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()

	events, done := s.turn("write a file")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	out, res := toolOutput(t, events)
	if !strings.Contains(out, "hello from the pod") || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("execute streamed %q, result %+v", out, res)
	}
	pod := threadPod(t, thread)
	if got := podExec(t, pod.Name, "cat", "/workspace/x"); got != "hello from the pod\n" {
		t.Errorf("/workspace/x in the pod = %q", got)
	}
	reqs := e.llm.Requests()
	if len(reqs) != 2 {
		t.Errorf("model called %d times, want 2", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+e.apiKey {
			t.Errorf("model request carried Authorization %q", got)
		}
	}
	for _, f := range []string{"/proc/1/environ", "/proc/self/environ"} {
		if strings.Contains(podExec(t, pod.Name, "cat", f), e.apiKey) {
			t.Errorf("the API key is in the pod (%s)", f)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, ev := range c.Env {
			if strings.Contains(ev.Value, e.apiKey) {
				t.Errorf("the API key is in the pod spec's env %s", ev.Name)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := chat.DeleteThread(ctx, chat.Config{URL: e.bridge, Token: e.token}, thread); err != nil {
		t.Fatalf("delete thread: %v", err)
	}
	waitFor(t, "the thread's pod, claim and ConfigMap gone", func() bool {
		p, c, m := objectsOf(t, e.id)
		return p+c+m == 0
	})
	claim := pod.Spec.Volumes
	for _, v := range claim {
		if v.PersistentVolumeClaim != nil {
			waitFor(t, "the claim's volume deleted", func() bool { return !volumeOfClaim(t, v.PersistentVolumeClaim.ClaimName) })
		}
	}
}

// volumeOfClaim says whether a PersistentVolume is still bound to claim.
func volumeOfClaim(t *testing.T, claim string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range pvs.Items {
		if r := v.Spec.ClaimRef; r != nil && r.Namespace == namespace && r.Name == claim {
			return true
		}
	}
	return false
}

// The pod carries the Docker path's hardening, as the API server holds it
// and as seen from inside: non-root, no capabilities, no_new_privs,
// seccomp filtering, read-only root, limits, no token, and no network but
// loopback and an eth0 connected to nothing (no route).
func TestKubePodIsHardened(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	s := e.dial("")
	pod := threadPod(t, s.conn.Thread())

	ps := pod.Spec
	c := ps.Containers[0]
	sc := c.SecurityContext
	switch {
	case ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken:
		t.Error("the pod mounts a ServiceAccount token")
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem not read-only in the spec")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp profile")
	case c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero():
		t.Error("no limits")
	case ps.HostNetwork:
		t.Error("host network")
	}
	status := podExec(t, pod.Name, "cat", "/proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q", want)
		}
	}
	if id := podExec(t, pod.Name, "id", "-u"); strings.TrimSpace(id) != "1000" {
		t.Errorf("runs as uid %q", id)
	}
	if out := podExec(t, pod.Name, "sh", "-c", "touch /usr/x 2>&1 || true"); !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing the root filesystem: %q", out)
	}
	if out := podExec(t, pod.Name, "sh", "-c", "ls /var/run/secrets/kubernetes.io 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("a ServiceAccount folder in the pod: %q", out)
	}
	// No route at all: the kernel's routing table of the pod is empty, so
	// nothing but its own addresses can be reached (no packet is sent).
	routes := strings.Split(strings.TrimSpace(podExec(t, pod.Name, "cat", "/proc/net/route")), "\n")
	if len(routes) != 1 {
		t.Errorf("the pod has routes:\n%s", strings.Join(routes, "\n"))
	}
	if r6 := strings.TrimSpace(podExec(t, pod.Name, "sh", "-c", "grep -v ' lo$' /proc/net/ipv6_route || true")); r6 != "" {
		t.Errorf("the pod has IPv6 routes:\n%s", r6)
	}
	// The bridge checked the same posture in the agent's hello; a turn runs.
	if _, done := s.turn("write"); done.Reason != wire.ReasonStop {
		t.Errorf("turn ended with %q", done.Reason)
	}
}

// The workspace is a claim that outlives the pod: a pod deleted from
// outside (kubectl delete, an eviction) is replaced on the same claim,
// the client is told (sandbox_replaced), and the next turn finds the file
// the last one wrote.
func TestKubeWorkspaceOutlivesPod(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("write a file"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	old := threadPod(t, thread)
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := cs.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var rep wire.SandboxReplaced
	if err := s.awaitEvent(wire.TypeSandboxReplaced).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	now := threadPod(t, thread)
	if now.UID == old.UID {
		t.Fatal("the pod was not replaced")
	}
	events, done := s.turn("read it back")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	if out, _ := toolOutput(t, events); !strings.Contains(out, "hello from the pod") {
		t.Errorf("after the replacement, /workspace/x reads %q", out)
	}
	if _, err := cs.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		if p, _ := cs.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{}); p.UID == old.UID {
			t.Error("the old pod's object is still there after its replacement")
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// A bridge that restarts adopts its running pods: the tunnel to each is
// started again, and the thread goes on in the same pod with its files.
func TestKubeBridgeRestartAdoptsPod(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("write a file"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	before := threadPod(t, thread)
	s.conn.Close()
	e.stopBridge()

	e.startBridge()
	if !strings.Contains(e.logText(), "adopted sandbox") {
		t.Errorf("the new bridge did not adopt the pod:\n%s", e.logText())
	}
	s = e.dial(thread)
	events, done := s.turn("read it back")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	if out, _ := toolOutput(t, events); !strings.Contains(out, "hello from the pod") {
		t.Errorf("after the restart, /workspace/x reads %q", out)
	}
	if after := threadPod(t, thread); after.UID != before.UID {
		t.Error("the pod was replaced, not adopted")
	}
}

// An image the node does not have is a clear error for the client, and
// the failed pod is not left behind.
func TestKubeMissingImageIsClearError(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge("--image", "boxwire:not-on-the-node")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := chat.Dial(ctx, chat.Config{URL: e.bridge + wire.Path, Token: e.token})
	if err == nil || !strings.Contains(err.Error(), "boxwire:not-on-the-node") || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("dial with a missing image: %v", err)
	}
	waitFor(t, "the failed pod gone", func() bool {
		p, _, m := objectsOf(t, e.id)
		return p+m == 0
	})
}

const slowScript = `{"model":"scripted","turns":[
  {"when":"slow","steps":[
    {"content":"Working.","tool_calls":[{"name":"execute","arguments":{"command":"echo started; sleep 120","timeout":180}}]},
    {"content":"Finished."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`

// A pod deleted in the middle of a turn: the turn ends (its lost work is
// ended, not left hanging), the pod is replaced on the same claim and the
// thread takes the next turn.
func TestKubePodDeletedMidTurn(t *testing.T) {
	e := newEnv(t, slowScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	pod := threadPod(t, thread)
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	var deleted bool
	var seen []wire.Type
	done, err := s.conn.Run(ctx, "slow work", func(ev wire.Envelope) {
		seen = append(seen, ev.Type)
		if ev.Type == wire.TypeToolOutput && !deleted {
			deleted = true
			if err := cs.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete pod: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("the turn did not end: %v (events %v)", err, seen)
	}
	if !deleted {
		t.Fatalf("the command never started (events %v)", seen)
	}
	if done.Reason == wire.ReasonStop {
		t.Errorf("a turn whose pod was deleted ended as if nothing happened: %+v", done)
	}
	replaced := false
	for _, typ := range seen {
		replaced = replaced || typ == wire.TypeSandboxReplaced
	}
	if !replaced {
		s.awaitEvent(wire.TypeSandboxReplaced)
	}
	if now := threadPod(t, thread); now.UID == pod.UID {
		t.Error("the pod was not replaced")
	}
	if _, d := s.turn("hello again"); d.Reason != wire.ReasonStop {
		t.Errorf("the next turn ended with %q", d.Reason)
	}
}

// A pod that cannot be scheduled (here: the node tainted for the test's
// length) fails the client's hello after --kube-start-timeout with the
// scheduler's reason, and leaves no pod.
func TestKubeUnschedulableIsClearError(t *testing.T) {
	taintNode(t, corev1.Taint{Key: "boxwire.test/hold", Value: "1", Effect: corev1.TaintEffectNoSchedule})
	e := newEnv(t, writeScript)
	e.startBridge("--kube-start-timeout", "8s")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := chat.Dial(ctx, chat.Config{URL: e.bridge + wire.Path, Token: e.token})
	if err == nil || !strings.Contains(err.Error(), "not scheduled") || !strings.Contains(err.Error(), "untolerated taint") {
		t.Fatalf("dial with no node to run on: %v", err)
	}
	t.Logf("the client's error: %v", err)
	if strings.Contains(err.Error(), "unbound") { // the scheduler's first word, before the claim bound
		t.Errorf("the error repeats a stale scheduling event: %v", err)
	}
	waitFor(t, "the pending pod gone", func() bool {
		p, _, m := objectsOf(t, e.id)
		return p+m == 0
	})
}

// taintNode puts taint on every node until the test ends.
func taintNode(t *testing.T, taint corev1.Taint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		n.Spec.Taints = append(n.Spec.Taints, taint)
		if _, err := cs.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("taint node %s: %v", n.Name, err)
		}
		name := n.Name
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
			defer cancel()
			for range 10 { // a conflict with the kubelet's own update: read again
				node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Errorf("untaint node %s: %v", name, err)
					return
				}
				node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == taint.Key })
				if _, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err == nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Errorf("node %s keeps the test's taint", name)
		})
	}
}
