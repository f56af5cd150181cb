package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

// env is one scenario: a scripted model, a bridge on the cluster, and
// what the test dialled, all ended when the test ends.
type env struct {
	t       *testing.T
	llm     *llmscript.Server
	llmURL  string
	apiKey  string
	token   string
	id      string
	dataDir string

	mu     sync.Mutex
	log    bytes.Buffer
	cmd    *exec.Cmd
	done   chan struct{}
	bridge string // http://127.0.0.1:PORT

	cleanupSet bool
	env        []string // more of the bridge's environment
	kubeconfig string   // the bridge's, when not the suite's admin one
}

func newEnv(t *testing.T, script string) *env {
	t.Helper()
	sc, err := llmscript.Parse([]byte(script))
	if err != nil {
		t.Fatalf("parse script: %v", err)
	}
	e := &env{t: t, apiKey: "sk-kube-" + randHex(12), token: "tok-" + randHex(12), id: "kube-" + randHex(4)}
	e.llm = llmscript.New(sc, llmscript.Options{APIKey: e.apiKey})
	srv := httptest.NewServer(e.llm)
	t.Cleanup(srv.Close)
	e.llmURL = srv.URL + "/v1"
	if e.dataDir, err = os.MkdirTemp("", "bwk"); err != nil { // short: unix socket paths
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(e.dataDir) })
	return e
}

var listenRE = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startBridge runs the bridge binary on the cluster and waits until it
// listens; the test's end stops it and runs bridge gc for its id.
func (e *env) startBridge(args ...string) {
	e.t.Helper()
	kc := kubecfg
	if e.kubeconfig != "" {
		kc = e.kubeconfig
	}
	cmd := exec.Command(bridgeBin, append([]string{"--listen", "127.0.0.1:0", "--engine", "kubernetes",
		"--kubeconfig", kc, "--namespace", namespace, "--image-pull-policy", "Never"}, args...)...)
	cmd.Env = append(os.Environ(),
		"BOXWIRE_TOKEN="+e.token, "BOXWIRE_IMAGE="+image, "BOXWIRE_DATA_DIR="+e.dataDir,
		"BOXWIRE_BRIDGE_ID="+e.id, "BOXWIRE_MODEL=scripted", "OPENAI_BASE_URL="+e.llmURL, "OPENAI_API_KEY="+e.apiKey)
	cmd.Env = append(cmd.Env, e.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start bridge: %v", err)
	}
	e.cmd, e.done = cmd, make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(e.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			e.mu.Lock()
			e.log.WriteString(sc.Text() + "\n")
			e.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	if !e.cleanupSet {
		e.cleanupSet = true
		e.t.Cleanup(func() { e.stopBridge(); e.collect() })
	}
	select {
	case e.bridge = <-found:
	case <-e.done:
		e.t.Fatalf("bridge exited before listening:\n%s", e.logText())
	case <-time.After(startTimeout):
		e.t.Fatalf("bridge did not listen within %v:\n%s", startTimeout, e.logText())
	}
}

func (e *env) logText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

// stopBridge sends SIGTERM and waits for the bridge; its sandboxes stay
// (the next bridge adopts them).
func (e *env) stopBridge() {
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(startTimeout):
		e.cmd.Process.Kill()
		<-e.done
		e.t.Errorf("bridge did not stop within %v", startTimeout)
	}
	e.cmd = nil
	if e.t.Failed() {
		e.t.Logf("bridge log:\n%s", e.logText())
	}
}

// killBridge ends the bridge with SIGKILL, as a crash would: it removes
// nothing.
func (e *env) killBridge() {
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Kill()
	<-e.done
	e.cmd = nil
}

// collect removes what the test's bridge id left (bridge gc), so the next
// test starts clean.
func (e *env) collect() {
	ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
	defer cancel()
	gc := exec.CommandContext(ctx, bridgeBin, "gc", "--engine", "kubernetes", "--kubeconfig", kubecfg, "--namespace", namespace)
	gc.Env = append(os.Environ(), "BOXWIRE_BRIDGE_ID="+e.id, "BOXWIRE_DATA_DIR="+e.dataDir)
	if out, err := gc.CombinedOutput(); err != nil {
		e.t.Errorf("bridge gc: %v\n%s", err, out)
	}
}

// session is one client connection.
type session struct {
	t    *testing.T
	conn *chat.Conn
}

func (e *env) dial(thread string) *session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+turnTimeout)
	defer cancel()
	conn, err := chat.Dial(ctx, chat.Config{URL: e.bridge + wire.Path, Token: e.token, Thread: thread})
	if err != nil {
		e.t.Fatalf("dial bridge: %v\nbridge log:\n%s", err, e.logText())
	}
	e.t.Cleanup(func() { conn.Close() })
	return &session{t: e.t, conn: conn}
}

// turn sends text and collects the turn's events until turn_done.
func (s *session) turn(text string) (events []wire.Envelope, done wire.TurnDone) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	done, err := s.conn.Run(ctx, text, func(ev wire.Envelope) { events = append(events, ev) })
	if err != nil {
		s.t.Fatalf("turn %q: %v (events so far: %d)", text, err, len(events))
	}
	return events, done
}

// awaitEvent waits for the next event of type typ, skipping others.
func (s *session) awaitEvent(typ wire.Type) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				s.t.Fatalf("connection ended while waiting for %s: %v", typ, s.conn.Err())
			}
			if ev.Type == typ {
				return ev
			}
		case <-timer.C:
			s.t.Fatalf("no %s event within %v", typ, eventTimeout)
		}
	}
}

// toolOutput is the streamed output and the result of a turn's tool call.
func toolOutput(t *testing.T, events []wire.Envelope) (string, wire.ToolResult) {
	t.Helper()
	var out strings.Builder
	var res wire.ToolResult
	for _, ev := range events {
		switch ev.Type {
		case wire.TypeToolOutput:
			var o wire.ToolOutput
			if err := ev.Decode(&o); err != nil {
				t.Fatal(err)
			}
			out.WriteString(o.Output)
		case wire.TypeToolResult:
			if err := ev.Decode(&res); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out.String(), res
}

// pods lists the suite namespace's pods whose bridge labels include l.
func pods(t *testing.T, l map[string]string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		ok := true
		for k, v := range l {
			ok = ok && p.Annotations[k] == v
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// threadPod is the one pod of thread.
func threadPod(t *testing.T, thread string) corev1.Pod {
	t.Helper()
	ps := pods(t, map[string]string{sandbox.LabelThread: thread})
	if len(ps) != 1 {
		t.Fatalf("%d pods for thread %s, want 1", len(ps), thread)
	}
	return ps[0]
}

// podExec runs cmd in pod's agent container and returns its stdout.
func podExec(t *testing.T, pod string, cmd ...string) string {
	t.Helper()
	u := cs.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "agent", Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	ex, err := remotecommand.NewWebSocketExecutor(restCfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec %q in %s: %v (%s)", cmd, pod, err, stderr.String())
	}
	return stdout.String()
}

// waitFor polls cond until it holds, failing after goneTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(goneTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, goneTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// objectsOf counts the pods, claims and ConfigMaps labelled with owner.
func objectsOf(t *testing.T, owner string) (podsN, claims, configMaps int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: sandbox.LabelOwner + "=" + owner}
	p, err1 := cs.CoreV1().Pods(namespace).List(ctx, sel)
	c, err2 := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, sel)
	m, err3 := cs.CoreV1().ConfigMaps(namespace).List(ctx, sel)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(fmt.Errorf("list: %v %v %v", err1, err2, err3))
	}
	return len(p.Items), len(c.Items), len(m.Items)
}
