package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// api calls the bridge's HTTP API with the admin token, decodes the
// answer into out (when not nil) and returns the status code.
func (e *env) api(method, path string, body, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+turnTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.bridge+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// turnShows runs a turn that must end with stop and whose execute must
// stream want.
func (s *session) turnShows(text, want string) {
	s.t.Helper()
	events, done := s.turn(text)
	if done.Reason != wire.ReasonStop {
		s.t.Fatalf("turn %q ended with %q", text, done.Reason)
	}
	if out, _ := toolOutput(s.t, events); !strings.Contains(out, want) {
		s.t.Errorf("turn %q: execute streamed %q, want %q", text, out, want)
	}
}

// turnStops runs a turn that must end with stop.
func (s *session) turnStops(text string) {
	s.t.Helper()
	if _, done := s.turn(text); done.Reason != wire.ReasonStop {
		s.t.Fatalf("turn %q ended with %q", text, done.Reason)
	}
}

// apiError is the body of a refused API call.
type apiError struct {
	Error wire.Error `json:"error"`
}

// threadInfo is GET /v1/threads/{id}.
func (e *env) threadInfo(thread string) wire.ThreadInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	info, err := chat.GetThread(ctx, chat.Config{URL: e.bridge, Token: e.token}, thread)
	if err != nil {
		e.t.Fatalf("get thread %s: %v", thread, err)
	}
	return info
}

// replacedBy waits on s for sandbox_exited then sandbox_replaced, both
// with reason, and returns the exit.
func (s *session) replacedBy(reason wire.ExitReason) wire.SandboxExited {
	s.t.Helper()
	var ex wire.SandboxExited
	if err := s.awaitEvent(wire.TypeSandboxExited).Decode(&ex); err != nil {
		s.t.Fatal(err)
	}
	if ex.Reason != reason {
		s.t.Fatalf("sandbox_exited %+v, want reason %s", ex, reason)
	}
	var rep wire.SandboxReplaced
	if err := s.awaitEvent(wire.TypeSandboxReplaced).Decode(&rep); err != nil {
		s.t.Fatal(err)
	}
	if rep.Reason != reason || rep.SandboxID == "" {
		s.t.Fatalf("sandbox_replaced %+v, want reason %s", rep, reason)
	}
	return ex
}

// ownerPods lists the pods of the test's bridge id, with labels l too.
func (e *env) ownerPods(l map[string]string) []string {
	e.t.Helper()
	want := map[string]string{sandbox.LabelOwner: e.id}
	for k, v := range l {
		want[k] = v
	}
	var names []string
	for _, p := range pods(e.t, want) {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// importImage gives the cluster's containerd the docker image img
// (e2e/kube/cluster/up.sh does the same for the suite's image); the test's
// end removes it there.
func importImage(t *testing.T, img string) {
	t.Helper()
	sock := filepath.Join(envOr("K8S_STATE", "/var/lib/boxwire-k8s"), "containerd.sock")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	imp := exec.CommandContext(ctx, "bash", "-c", `docker save "$1" | ctr -a "$2" -n k8s.io images import - >/dev/null`, "import", img, sock)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import %s into the cluster: %v\n%s", img, err, out)
	}
	t.Cleanup(func() {
		ref := img
		if !bytes.ContainsRune([]byte(ref), '/') {
			ref = "docker.io/library/" + ref
		}
		_ = exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "rm", ref).Run()
	})
}

// dockerTag tags the suite's image as tag for the test (untagged at its
// end; the image itself stays).
func dockerTag(t *testing.T, tag string) {
	t.Helper()
	if out, err := exec.Command("docker", "tag", image, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
}
