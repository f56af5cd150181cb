package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/term"
)

// termSink is a terminal connection's handler: every session's output and
// every message, for the test to wait on.
type termSink struct {
	mu      sync.Mutex
	out     bytes.Buffer
	msgs    []wire.Envelope
	changed chan struct{}
}

func (s *termSink) Output(_ string, data []byte) {
	s.mu.Lock()
	s.out.Write(data)
	s.mu.Unlock()
	s.notify()
}

func (s *termSink) Message(env wire.Envelope) {
	s.mu.Lock()
	s.msgs = append(s.msgs, env)
	s.mu.Unlock()
	s.notify()
}

func (s *termSink) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// await waits until cond holds on the output and messages so far.
func (s *termSink) await(t *testing.T, what string, cond func(out string, msgs []wire.Envelope) bool) {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		s.mu.Lock()
		ok := cond(s.out.String(), s.msgs)
		out := s.out.String()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("%s: not within %v; output so far %q", what, eventTimeout, out)
		}
	}
}

// A terminal in a pod: a login shell on a PTY over the relay takes typed
// input, knows its window size, and its exit code reaches the client.
func TestKubeTerminal(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	sink := &termSink{changed: make(chan struct{}, 1)}
	conn, err := term.Dial(ctx, chat.Config{URL: e.bridge + wire.Path, Token: e.token}, sink)
	if err != nil {
		t.Fatalf("dial terminal connection: %v\n%s", err, e.logText())
	}
	t.Cleanup(func() { conn.Close() })
	a, err := conn.Open(ctx, wire.TerminalOpen{Cols: 101, Rows: 33})
	if err != nil {
		t.Fatalf("open terminal: %v", err)
	}
	if err := conn.Input(ctx, a.Session, []byte("echo typed-$((6*7)); stty size; id -u; exit 3\n")); err != nil {
		t.Fatal(err)
	}
	sink.await(t, "the shell's answer and exit", func(out string, msgs []wire.Envelope) bool {
		if !strings.Contains(out, "typed-42") || !strings.Contains(out, "33 101") || !strings.Contains(out, "1000") {
			return false
		}
		for _, m := range msgs {
			var x wire.TerminalExit
			if m.Type == wire.TypeTerminalExit && m.Decode(&x) == nil && x.Session == a.Session {
				if x.ExitCode != 3 {
					t.Fatalf("terminal_exit %+v, want exit code 3", x)
				}
				return true
			}
		}
		return false
	})
	if p := threadPod(t, conn.Thread()); p.Status.Phase != "Running" {
		t.Errorf("the thread's pod is %s", p.Status.Phase)
	}
}

// File transfer into and out of a pod's workspace: an upload lands on the
// claim (read back in the pod), a download returns the same bytes, and a
// folder comes back as a tar stream.
func TestKubeFileTransfer(t *testing.T) {
	e := newEnv(t, writeScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	blob := make([]byte, 3<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(blob)
	cfg := chat.Config{URL: e.bridge, Token: e.token}
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	res, err := chat.Upload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "/workspace/in/blob.bin"}, wire.ContentTypeRaw, bytes.NewReader(blob), int64(len(blob)))
	if err != nil || res.Failed != 0 || res.Bytes != int64(len(blob)) {
		t.Fatalf("upload: %+v %v", res, err)
	}
	pod := threadPod(t, thread)
	if got := strings.Fields(podExec(t, pod.Name, "sha256sum", "/workspace/in/blob.bin")); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
		t.Fatalf("the uploaded file in the pod hashes to %v", got)
	}
	d, err := chat.OpenDownload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "/workspace/in/blob.bin"}, true)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	back, err := io.ReadAll(d.Body)
	d.Close()
	if err != nil || !bytes.Equal(back, blob) {
		t.Fatalf("downloaded %d bytes (%v), want the %d uploaded", len(back), err, len(blob))
	}
	d, err = chat.OpenDownload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "/workspace/in"}, false)
	if err != nil {
		t.Fatalf("download the folder: %v", err)
	}
	n, err := io.Copy(io.Discard, d.Body)
	res, rerr := d.Result()
	d.Close()
	if err != nil || rerr != nil || n < int64(len(blob)) || res.Failed != 0 || res.Count < 1 {
		t.Fatalf("the folder's tar: %d bytes, %+v, %v %v", n, res, err, rerr)
	}
}

// The canary hunt from inside a pod: the bridge's environment, its key
// file and its token hold canaries; none is in the pod — not in any
// process's environment, not in a file, not in the pod's spec, its
// annotations or its ConfigMap — and the LLM token is in no environment
// (it comes in the claim). The posture check passed (the pod runs).
func TestKubeCanaryHunt(t *testing.T) {
	e := newEnv(t, writeScript)
	canary := "CANARY-" + randHex(16)
	keyFile := filepath.Join(e.dataDir, "key.txt")
	if err := os.WriteFile(keyFile, []byte(canary+"-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "BOXWIRE_CANARY_ENV="+canary+"-env", "BOXWIRE_KEY_FILE="+keyFile,
		"BOXWIRE_EGRESS_ALLOW=example.invalid")
	e.startBridge()
	s := e.dial("")
	events, _ := s.turn("write a file")
	pod := threadPod(t, s.conn.Thread())
	secrets := []string{canary, e.apiKey, e.token}
	plant := "PLANTED-" + randHex(8) // the hunt must find this one
	podExec(t, pod.Name, "sh", "-c", "echo "+plant+" > /workspace/planted")
	out := podExec(t, pod.Name, "sh", "-c",
		"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rIl -e "+canary+" -e "+e.apiKey+" -e "+e.token+" -e "+plant+
			" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true")
	if !strings.Contains(out, "/workspace/planted") {
		t.Fatalf("the hunt did not find the planted file: %q", out)
	}
	for _, sec := range secrets {
		if strings.Contains(out, sec) {
			t.Errorf("secret %q found in the pod", sec)
		}
	}
	if !strings.Contains(out, "BOXWIRE_LISTEN=") {
		t.Fatalf("no environment read in the pod: %q", out)
	}
	if strings.Contains(out, "BOXWIRE_LLM_TOKEN=") {
		t.Errorf("the LLM token is in an environment in the pod")
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	objects := [][]byte{raw}
	if cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
		b, _ := cm.Marshal()
		objects = append(objects, b)
	}
	for _, ev := range events {
		b, _ := wire.Marshal(ev)
		objects = append(objects, b)
	}
	for _, o := range objects {
		for _, sec := range secrets {
			if bytes.Contains(o, []byte(sec)) {
				t.Errorf("secret %q in the pod's spec, its ConfigMap or a frame", sec)
			}
		}
	}
	if pod.Annotations[sandbox.LabelOwner] != e.id {
		t.Errorf("owner annotation %q", pod.Annotations[sandbox.LabelOwner])
	}
}
