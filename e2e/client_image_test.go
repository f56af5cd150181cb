package e2e_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Issue 20's leftovers on the real engine, through the real binaries:
// `client --thread ID --image IMAGE` moves an existing thread to another
// allowed image keeping workspace and conversation, and refuses bad input
// without moving anything; `bridge images` lists the images in use and
// their threads (from the running bridge); GET /metrics names each
// thread's image and agent version.
func TestClientMovesThreadImage(t *testing.T) {
	ai := newAgentImages(t)
	tag, other := "boxwire-e2e-rollout:"+randHex(6), "boxwire-e2e-rollout:"+randHex(6)
	fromV, toV := "cli-from-"+randHex(4), "cli-to-"+randHex(4)
	ai.build(tag, fromV)
	ai.build(other, toV)
	e := newEnv(t, continuityScript)
	b := e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_IMAGES="+other)
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	s.conn.Close()

	bridgeImages := func(env []string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bridgeBin, append([]string{"images"}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"BOXWIRE_URL=" + b.url, "BOXWIRE_TOKEN="}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	wantImages := func(image string, threads string) {
		t.Helper()
		out, err := bridgeImages([]string{"BOXWIRE_TOKEN=" + e.token})
		if err != nil {
			t.Fatalf("bridge images: %v\n%s", err, out)
		}
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == image && f[2] == threads {
				return
			}
		}
		t.Fatalf("bridge images: no row for %s with %s thread(s):\n%s", image, threads, out)
	}
	wantImages(tag, "1")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no token", nil, nil, "BOXWIRE_TOKEN"},
		{"no bridge running", []string{"BOXWIRE_TOKEN=" + e.token, "BOXWIRE_URL=http://127.0.0.1:1"}, nil, "is a bridge running at http://127.0.0.1:1"},
		{"an argument", []string{"BOXWIRE_TOKEN=" + e.token}, []string{"extra"}, "takes no arguments"},
		{"not an admin", []string{"BOXWIRE_TOKEN=bwk_not-a-key"}, nil, "401"},
	} {
		if out, err := bridgeImages(tc.env, tc.args...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("bridge images, %s: %v, want an error with %q:\n%s", tc.name, err, tc.want, out)
		}
	}
	wantMetric(t, e, `boxwire_thread_agent{`, `thread="`+thread+`"`, `image="`+tag+`"`, `agent_version="`+fromV+`"`)

	// Bad input: a clear error, exit code 2, and the thread stays where it was.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", other, "--runtime", "runc"}, "cannot apply"},
		{[]string{"--image", "boxwire-e2e-not-allowed:" + randHex(4)}, "not_allowed"},
	} {
		args := append([]string{"--url", b.url, "--thread", thread}, append(tc.args, "-m", "which number did I ask you to remember?")...)
		if _, stderr, code := e.runClient(args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("client %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if info := e.threadInfo(thread); info.Image != tag || info.AgentVersion != fromV {
			t.Fatalf("after the refused client %v the thread runs %q agent %q", tc.args, info.Image, info.AgentVersion)
		}
	}

	out, stderr, code := e.runClient("--url", b.url, "--thread", thread, "--image", other, "-m", "which number did I ask you to remember?")
	if code != 0 || !strings.Contains(out, "It was 42.") || !strings.Contains(stderr, "moves to image "+other) {
		t.Fatalf("client --image: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	waitFor(t, "the thread on the new image's agent", func() bool {
		info := e.threadInfo(thread)
		return info.Image == other && info.AgentVersion == toV
	})
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, nil); !ok {
		t.Errorf("the model was not sent the earlier conversation: %s", msgs)
	}
	if got := dockerExec(t, e.containerOf(thread), "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the move", got)
	}
	wantImages(other, "1")
	wantMetric(t, e, `boxwire_thread_agent{`, `thread="`+thread+`"`, `image="`+other+`"`, `agent_version="`+toV+`"`)
	wantMetric(t, e, `boxwire_agent_threads{`, `image="`+other+`"`, `agent_version="`+toV+`"`, `} 1`)
}

// wantMetric fails the test unless a line of GET /metrics (as the admin)
// holds every one of parts (the library writes labels in name order).
func wantMetric(t *testing.T, e *env, parts ...string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.bridge.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, raw)
	}
	for line := range strings.Lines(string(raw)) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return
		}
	}
	t.Fatalf("GET /metrics has no line with %q:\n%s", parts, raw)
}
