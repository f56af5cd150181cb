package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// The test cluster's addresses (e2e/kube/cluster/up.sh): the host's end of
// the veth, and the node's, where the API server listens.
const (
	hostIP     = "10.250.0.1"
	apiAddress = "10.250.0.2"
	bridgePort = 7420
)

// The bridge runs in the cluster as bridge/sandbox/kube/deploy's manifests
// make it — its ServiceAccount and Role (rbac.yaml), its store's claim,
// Deployment and Service (bridge.yaml), its image (Dockerfile): uid 1000,
// no capability, read-only root, the in-cluster config — and a chat turn
// with a tool call works through its Service (port-forwarded, as kubectl
// port-forward svc/boxwire-bridge does), in a sandbox pod it made.
//
// What the test cluster changes in the Deployment: the image and pull
// policy (imported, Never); hostNetwork, with the API server's address in
// KUBERNETES_SERVICE_HOST, because this cluster's pods have no network at
// all (cni-dummy, made for sandboxes) and no kube-proxy; and the scripted
// model's address on the host's end of the veth.
func TestKubeBridgeInCluster(t *testing.T) {
	e := newEnv(t, writeScript)
	llm := listenLLM(t, e)
	bridgeImage := buildBridgeImage(t)
	importImage(t, bridgeImage)
	applyRBAC(t)
	objs := bridgeObjects(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "boxwire-bridge", Namespace: namespace},
		StringData: map[string]string{"token": e.token, "openai-api-key": e.apiKey}}
	if _, err := cs.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := objs.deployment
	c := &dep.Spec.Template.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = bridgeImage, corev1.PullNever
	dep.Spec.Template.Spec.HostNetwork = true
	setEnv(c, map[string]string{
		"KUBERNETES_SERVICE_HOST": apiAddress, "KUBERNETES_SERVICE_PORT": "6443",
		"OPENAI_BASE_URL": llm, "BOXWIRE_IMAGE": image, "BOXWIRE_IMAGE_PULL_POLICY": "Never",
		"BOXWIRE_BRIDGE_ID": e.id, "BOXWIRE_MODEL": "scripted",
	})
	t.Cleanup(func() { removeBridgeObjects(t, e) })
	if _, err := cs.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, objs.claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(namespace).Create(ctx, objs.service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := awaitBridgePod(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bridge pod's log:\n%s", podLogs(pod.Name, "bridge"))
		}
	})
	psc, sc := pod.Spec.SecurityContext, pod.Spec.Containers[0].SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 1000 || sc == nil || sc.Capabilities == nil ||
		len(sc.Capabilities.Add) != 0 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the bridge pod's security context: %+v %+v", psc, sc)
	}

	e.bridge = forwardService(t, objs.service.Name)
	s := e.dial("")
	s.turnShows("write a file", "hello from the pod")
	sb := threadPod(t, s.conn.Thread())
	if sb.Annotations[sandbox.LabelOwner] != e.id || sb.Name == pod.Name {
		t.Errorf("the thread runs in %s (owner %q)", sb.Name, sb.Annotations[sandbox.LabelOwner])
	}
	for _, r := range e.llm.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+e.apiKey {
			t.Errorf("model request from the in-cluster bridge carried Authorization %q", got)
		}
	}
}

// listenLLM serves e's scripted model on the host's end of the cluster's
// veth (a bridge pod on the node's network reaches it there) and returns
// its base URL.
func listenLLM(t *testing.T, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		t.Fatalf("listen on the cluster's veth (is the cluster up?): %v", err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: e.llm}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// buildBridgeImage builds bridge/sandbox/kube/deploy/Dockerfile with a
// static bridge (CA certificates from the suite's image) and returns its
// tag; the test's end removes the tag.
func buildBridgeImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tag := "boxwire-bridge:kube-e2e"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "bridge"), "github.com/boxwire/boxwire/bridge")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the bridge: %v\n%s", err, out)
	}
	img := exec.CommandContext(ctx, "docker", "build", "-q", "--build-arg", "BASE="+image, "-t", tag,
		"-f", filepath.Join(repoRoot(), "bridge/sandbox/kube/deploy/Dockerfile"), dir)
	if out, err := img.CombinedOutput(); err != nil {
		t.Fatalf("build the bridge image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
	return tag
}

// bridgeManifests are bridge.yaml's objects, in the suite's namespace.
type bridgeManifests struct {
	claim      *corev1.PersistentVolumeClaim
	deployment *appsv1.Deployment
	service    *corev1.Service
}

func bridgeObjects(t *testing.T) bridgeManifests {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "bridge/sandbox/kube/deploy/bridge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m bridgeManifests
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("bridge.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			o.Namespace, m.claim = namespace, o
		case *appsv1.Deployment:
			o.Namespace, m.deployment = namespace, o
		case *corev1.Service:
			o.Namespace, m.service = namespace, o
		default:
			t.Fatalf("bridge.yaml has a %T", obj)
		}
	}
	if m.claim == nil || m.deployment == nil || m.service == nil {
		t.Fatalf("bridge.yaml lacks an object: %+v", m)
	}
	return m
}

// setEnv sets the container's environment variables of vals (replacing
// any of the same name, value or reference).
func setEnv(c *corev1.Container, vals map[string]string) {
	for i := 0; i < len(c.Env); i++ {
		if _, ok := vals[c.Env[i].Name]; ok {
			c.Env = append(c.Env[:i], c.Env[i+1:]...)
			i--
		}
	}
	for k, v := range vals {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
}

// bridgeSelector selects the bridge's pods (bridge.yaml's labels).
const bridgeSelector = "app.kubernetes.io/name=boxwire-bridge"

// awaitBridgePod waits until the Deployment's pod is ready and returns it.
func awaitBridgePod(t *testing.T) corev1.Pod {
	t.Helper()
	var last corev1.Pod
	deadline := time.Now().Add(2 * startTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: bridgeSelector})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			last = p
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return p
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the bridge pod %s is not ready: %+v\nits log:\n%s", last.Name, last.Status, podLogs(last.Name, "bridge"))
	return last
}

// podLogs is the last lines of a pod's container ("" if none).
func podLogs(pod, container string) string {
	if pod == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	n := int64(200)
	out, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &n}).DoRaw(ctx)
	if err != nil {
		return "(logs: " + err.Error() + ")"
	}
	return string(out)
}

// forwardService forwards a local port to the Service's port as kubectl
// port-forward svc/NAME does (to a pod its selector picks, at the port its
// targetPort names) and returns the local URL; the test's end stops it.
func forwardService(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	svc, err := cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("the Service's pods: %v (%d)", err, len(list.Items))
	}
	pod := list.Items[0]
	port := svc.Spec.Ports[0].TargetPort.IntValue()
	for _, cp := range pod.Spec.Containers[0].Ports {
		if cp.Name == svc.Spec.Ports[0].TargetPort.String() {
			port = int(cp.ContainerPort)
		}
	}
	if port == 0 {
		t.Fatalf("the Service's target port %s is not in the pod", svc.Spec.Ports[0].TargetPort.String())
	}
	rt, upgrader, err := spdy.RoundTripperFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	u := cs.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut testutil.Buffer
	pf, err := portforward.New(dialer, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward to %s: %v %s", pod.Name, err, errOut.String())
	case <-time.After(eventTimeout):
		t.Fatalf("port-forward to %s not ready within %v", pod.Name, eventTimeout)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports %v: %v", ports, err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)
}

// removeBridgeObjects deletes the bridge's Deployment and waits for its
// pod to go, runs bridge gc for its id (its sandbox pods and claims), and
// deletes its claim, Service and Secret.
func removeBridgeObjects(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
	defer cancel()
	bg := metav1.DeletePropagationForeground
	_ = cs.AppsV1().Deployments(namespace).Delete(ctx, "boxwire-bridge", metav1.DeleteOptions{PropagationPolicy: &bg})
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: bridgeSelector})
		if err == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	e.collect()
	_ = cs.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, "boxwire-bridge-data", metav1.DeleteOptions{})
	_ = cs.CoreV1().Services(namespace).Delete(ctx, "boxwire-bridge", metav1.DeleteOptions{})
	_ = cs.CoreV1().Secrets(namespace).Delete(ctx, "boxwire-bridge", metav1.DeleteOptions{})
}
