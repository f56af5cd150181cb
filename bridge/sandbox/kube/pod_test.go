package kube_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/sandbox/kube"
)

func newKube(t *testing.T, cfg kube.Config) *kube.Kube {
	t.Helper()
	cfg.Rest = &rest.Config{Host: "https://127.0.0.1:1"}
	k, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func testSpec(t *testing.T) sandbox.Spec {
	dir := t.TempDir()
	bridge, agent := filepath.Join(dir, "run"), filepath.Join(dir, "agent")
	for _, d := range []string{bridge, agent} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("unix", filepath.Join(bridge, "llm.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.WriteFile(filepath.Join(bridge, "ca.pem"), []byte("CERT"), 0o644); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		Name: "boxwire-t_0123abcd", Image: "boxwire:kube",
		Env: []string{"BOXWIRE_LISTEN=unix:/run/boxwire-agent/agent.sock", "BOXWIRE_EGRESS_SOCKET=/run/boxwire/egress.sock"},
		Labels: map[string]string{
			sandbox.LabelOwner: "bridge-1", sandbox.LabelThread: "t_0123abcd", sandbox.LabelCreated: "2026-12-01T10:00:00Z",
		},
		SocketDir: bridge, AgentDir: agent, WorkspaceVolume: "boxwire-ws-t_0123abcd", User: "1000:1000",
	}
}

// The pod carries the Docker path's hardening: numeric non-root user, no
// capabilities, no privilege escalation, read-only root, seccomp, limits,
// no ServiceAccount token and no service links.
func TestPodIsHardened(t *testing.T) {
	t.Parallel()
	k := newKube(t, kube.Config{RuntimeClass: "gvisor", Defaults: sandbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 5e8}})
	pod, err := k.PodFor(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	ps, c := pod.Spec, pod.Spec.Containers[0]
	sc := c.SecurityContext
	checks := []struct {
		ok   bool
		what string
	}{
		{ps.AutomountServiceAccountToken != nil && !*ps.AutomountServiceAccountToken, "no ServiceAccount token"},
		{ps.EnableServiceLinks != nil && !*ps.EnableServiceLinks, "no service links"},
		{!ps.HostNetwork && !ps.HostPID && !ps.HostIPC, "no host namespaces"},
		{ps.RestartPolicy == corev1.RestartPolicyNever, "restart policy Never (the bridge replaces)"},
		{ps.RuntimeClassName != nil && *ps.RuntimeClassName == "gvisor", "the RuntimeClass"},
		{ps.SecurityContext.RunAsNonRoot != nil && *ps.SecurityContext.RunAsNonRoot, "pod runAsNonRoot"},
		{sc.RunAsUser != nil && *sc.RunAsUser == 1000 && sc.RunAsGroup != nil && *sc.RunAsGroup == 1000, "numeric user 1000:1000"},
		{sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "no privilege escalation"},
		{sc.Privileged != nil && !*sc.Privileged, "not privileged"},
		{sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "read-only root"},
		{sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0, "all capabilities dropped"},
		{sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "seccomp RuntimeDefault"},
		{c.Resources.Limits.Memory().Value() == 1<<30 && c.Resources.Limits.Cpu().MilliValue() == 500, "limits from the defaults"},
		{c.Resources.Requests.Memory().Value() > 0 && c.Resources.Requests.Cpu().MilliValue() > 0, "requests"},
		{len(c.Ports) == 0, "no ports"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("pod lacks %s", ch.what)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, p := range []string{"/tmp", sandbox.SocketMount, sandbox.AgentMount, sandbox.WorkspaceMount} {
		if _, ok := mounts[p]; !ok {
			t.Errorf("nothing mounted at %s", p)
		}
	}
	if m, ok := mounts[sandbox.SocketMount+"/ca.pem"]; !ok || !m.ReadOnly || m.SubPath != "ca.pem" {
		t.Errorf("the bridge folder's file ca.pem is not mounted read-only: %+v", m)
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
		if v.Name == "workspace" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != kube.ObjectName("boxwire-ws-t_0123abcd")) {
			t.Errorf("workspace volume %+v, want the claim", v.VolumeSource)
		}
	}
	if got := pod.Annotations["boxwire.io/sockets"]; got != "egress.sock,llm.sock" {
		t.Errorf("sockets carried: %q, want the folder's and the environment's", got)
	}
	if pod.Annotations[sandbox.LabelCreated] != "2026-12-01T10:00:00Z" {
		t.Error("the creation label is not kept exactly in the annotations")
	}
	if _, ok := pod.Labels[sandbox.LabelCreated]; ok {
		t.Error("a time (not a valid label value) became a label")
	}
	if pod.Labels[sandbox.LabelThread] != "t_0123abcd" || pod.Labels[sandbox.LabelOwner] != "bridge-1" {
		t.Errorf("labels %v lack owner and thread", pod.Labels)
	}
	k2 := newKube(t, kube.Config{SeccompProfile: "boxwire.json", Workspace: kube.WorkspaceEmptyDir})
	pod, err = k2.PodFor(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	sc = pod.Spec.Containers[0].SecurityContext
	if sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *sc.SeccompProfile.LocalhostProfile != "boxwire.json" {
		t.Errorf("seccomp %+v, want Localhost boxwire.json", sc.SeccompProfile)
	}
	if pod.Spec.RuntimeClassName != nil {
		t.Errorf("runtime class %q without one configured", *pod.Spec.RuntimeClassName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "workspace" && v.EmptyDir == nil {
			t.Errorf("emptydir workspace is %+v", v.VolumeSource)
		}
	}
}

// A user pods cannot check, or root, is refused.
func TestPodUserMustBeNumericNonRoot(t *testing.T) {
	t.Parallel()
	k := newKube(t, kube.Config{})
	for _, u := range []string{"boxwire", "0:0", "1000:0", "x:1000"} {
		spec := testSpec(t)
		spec.User = u
		if _, err := k.PodFor(spec); err == nil {
			t.Errorf("user %q accepted", u)
		}
	}
}

// Bridge names become valid, distinct object names.
func TestObjectNames(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, n := range []string{"boxwire-t_0123", "boxwire-t-0123", "Boxwire-T_0123", "boxwire-ws-t_0123", strings.Repeat("x_", 60), "_"} {
		o := kube.ObjectName(n)
		if errs := validation.IsDNS1123Label(o); len(errs) > 0 {
			t.Errorf("%q → %q: %v", n, o, errs)
		}
		if prev, dup := seen[o]; dup {
			t.Errorf("%q and %q both → %q", prev, n, o)
		}
		seen[o] = n
	}
	if kube.ObjectName("boxwire-abc") != "boxwire-abc" {
		t.Error("a valid name was changed")
	}
}

// Bad configuration is refused by New.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []kube.Config{{Workspace: "hostpath"}, {CPURequest: "lots"}, {WorkspaceSize: "big"}} {
		cfg.Rest = &rest.Config{Host: "https://127.0.0.1:1"}
		if k, err := kube.New(cfg); err == nil {
			k.Close()
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// The last warning of a pod is the one seen last, whichever API made it:
// the scheduler's events (events.k8s.io) carry EventTime or a series, not
// LastTimestamp.
func TestNewestEvent(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	evs := []corev1.Event{
		{Message: "core, old", LastTimestamp: metav1.NewTime(at(10))},
		{Message: "events API, series", EventTime: metav1.NewMicroTime(at(5)), Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(at(30))}},
		{Message: "events API, once", EventTime: metav1.NewMicroTime(at(20))},
	}
	if got := kube.NewestEvent(evs).Message; got != "events API, series" {
		t.Fatalf("newest %q", got)
	}
	evs[0].LastTimestamp = metav1.NewTime(at(40))
	if got := kube.NewestEvent(evs).Message; got != "core, old" {
		t.Fatalf("newest %q", got)
	}
}
