package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Rollouts (issue 20 items 1-3, docs/lifecycle.md "Rollouts"): images
// rebuilt with a new agent binary whose version the test sets, and what
// every thread, pooled sandbox and running turn makes of it.

// rolloutScript holds one turn on a command for a while (a turn running
// through the rebuild) and answers anything else at once.
const rolloutScript = `{"model":"scripted","turns":[
  {"when":"hold","steps":[
    {"content":"Holding.","tool_calls":[{"name":"execute","arguments":{"command":"sleep 8; echo held"}}]},
    {"content":"Held."}
  ]},
  {"when":"remember","steps":[{"content":"Noted: 42."}]},
  {"steps":[{"content":"ok"}]}
]}`

// agentBuild builds the agent (static, as make agent does) with version
// into a folder of its own and returns the binary's path.
func agentBuild(t *testing.T, version string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bwagent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the engine mounts the binary from here
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "boxwire-agent")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, "github.com/boxwire/boxwire/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent %s: %v %s", version, err, out)
	}
	return bin
}

// fileHash is "sha256:<hex>" of the file at path.
func fileHash(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// agentImages builds images FROM the e2e image with only the agent binary
// changed, and removes every one it built when the test ends (register it
// before cleanAtEnd, so the sandboxes go first).
type agentImages struct {
	t   *testing.T
	mu  sync.Mutex
	ids []string
}

func newAgentImages(t *testing.T) *agentImages {
	ai := &agentImages{t: t}
	t.Cleanup(func() {
		ai.mu.Lock()
		defer ai.mu.Unlock()
		slices.Reverse(ai.ids)
		for _, id := range ai.ids {
			// Newest first: each id (a tag rebuilt since names another).
			_ = exec.Command("docker", "rmi", id).Run() // and the build's untagged parents
		}
	})
	return ai
}

// build tags tag as the e2e image with an agent of version, and returns
// the new image id and the binary's hash.
func (ai *agentImages) build(tag, version string) (id, hash string) {
	t := ai.t
	t.Helper()
	bin := agentBuild(t, version)
	dir := filepath.Dir(bin)
	df := "FROM " + image + "\nCOPY boxwire-agent /usr/local/bin/boxwire-agent\nLABEL io.boxwire.agent.version=" + version + "\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v %s", tag, err, out)
	}
	id = imageID(t, tag)
	ai.mu.Lock()
	ai.ids = append(ai.ids, tag, id)
	ai.mu.Unlock()
	return id, fileHash(t, bin)
}

// rollout is GET /v1/rollout.
func (e *env) rollout() fleet.RolloutStatus {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.bridge.url+"/v1/rollout", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st fleet.RolloutStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/rollout: %d %v", resp.StatusCode, err)
	}
	return st
}

// patchThread sends PATCH /v1/threads/{id} with body and returns the
// status and the answer's body.
func (e *env) patchThread(id, body string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, e.bridge.url+"/v1/threads/"+id, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// watchVersions polls the threads ids every 100 ms from now on and sends,
// once each reports agent version v, when each did (sorted). It gives up
// when the test ends.
func (e *env) watchVersions(ids []string, v string) <-chan []time.Time {
	done := make(chan []time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	go func() {
		moved := map[string]time.Time{}
		for len(moved) < len(ids) && ctx.Err() == nil {
			for _, id := range ids {
				if _, ok := moved[id]; !ok && e.agentVersion(ctx, id) == v {
					moved[id] = time.Now()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		var times []time.Time
		for _, at := range moved {
			times = append(times, at)
		}
		slices.SortFunc(times, time.Time.Compare)
		done <- times
	}()
	return done
}

// agentVersion is thread id's agent_version, "" when the bridge does not
// answer; unlike threadInfo it does not fail the test (watchVersions).
func (e *env) agentVersion(ctx context.Context, id string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.bridge.url+"/v1/threads/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var info wire.ThreadInfo
	if json.NewDecoder(resp.Body).Decode(&info) != nil {
		return ""
	}
	return info.AgentVersion
}

// pooledImageIDs are the image ids of the bridge's pooled sandboxes no
// thread took.
func (e *env) pooledImageIDs() []string {
	var ids []string
	for _, c := range e.containers(map[string]string{"boxwire.pool": "1"}) {
		if c.Labels["boxwire.thread"] != "" {
			continue
		}
		out, err := exec.Command("docker", "inspect", "-f", "{{.Image}}", c.ID).Output()
		if err == nil {
			ids = append(ids, strings.TrimSpace(string(out)))
		}
	}
	return ids
}

// A rebuild with a new agent binary while threads idle, one runs a turn
// and sandboxes sit in the pool: the pool is drained and refilled at once
// and every new thread gets the new agent; idle threads move one batch per
// interval; the running turn finishes on the old agent, which is replaced
// after it.
func TestRolloutNewAgentBinary(t *testing.T) {
	ai := newAgentImages(t)
	tag := "boxwire-e2e-rollout:" + randHex(6)
	oldV, newV := "rollout-old-"+randHex(4), "rollout-new-"+randHex(4)
	oldID, oldHash := ai.build(tag, oldV)
	e := newEnv(t, rolloutScript)
	const interval = 4 * time.Second
	e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_REAP_INTERVAL=200ms", "BOXWIRE_POOL=1",
		"BOXWIRE_ROLLOUT_BATCH=1", "BOXWIRE_ROLLOUT_INTERVAL="+interval.String())
	e.cleanAtEnd()
	awaitPoolReady(t, e, 1)

	var idle []string
	for range 3 {
		idle = append(idle, e.createThread(wire.CreateThread{}).ID)
	}
	busy := e.dial("")
	for _, id := range append(slices.Clone(idle), busy.conn.Thread()) {
		if info := e.threadInfo(id); info.AgentVersion != oldV || info.AgentHash != oldHash || info.ImageID != oldID {
			t.Fatalf("thread %s before the rebuild: agent %q %q image %q; want %q %q %q", id, info.AgentVersion, info.AgentHash, info.ImageID, oldV, oldHash, oldID)
		}
	}
	held := make(chan []wire.Envelope, 1)
	go func() { // a turn that runs through the rebuild
		events, done := busy.turn("please hold")
		if done.Reason != wire.ReasonStop {
			t.Errorf("held turn ended %q", done.Reason)
		}
		held <- events
	}()
	awaitPoolReady(t, e, 1)
	time.Sleep(time.Second) // the command runs

	watch := e.watchVersions(idle, newV)
	newID, newHash := ai.build(tag, newV)
	rebuilt := time.Now()
	fresh := e.createThread(wire.CreateThread{})
	if fresh.AgentVersion != newV || fresh.AgentHash != newHash || fresh.ImageID != newID {
		t.Errorf("a thread created right after the rebuild runs agent %q %q image %q; want the new build", fresh.AgentVersion, fresh.AgentHash, fresh.ImageID)
	}
	waitFor(t, "the pool drained and refilled with the new build", func() bool {
		ids := e.pooledImageIDs()
		return len(ids) == 1 && ids[0] == newID
	})

	var times []time.Time
	select {
	case times = <-watch:
	case <-time.After(time.Duration(len(idle)+2) * (interval + eventTimeout)):
		t.Fatal("not every idle thread reached the new agent")
	}
	t.Logf("moves after the rebuild: %v", func() (d []time.Duration) {
		for _, at := range times {
			d = append(d, at.Sub(rebuilt).Round(100*time.Millisecond))
		}
		return d
	}())
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < interval/2 {
			t.Errorf("moves %v apart with --rollout-batch 1 --rollout-interval %v", gap, interval)
		}
	}
	if t.Failed() {
		for line := range strings.Lines(e.bridge.logText()) {
			if strings.Contains(line, "recycl") || strings.Contains(line, "recreated") || strings.Contains(line, "warm pool") {
				t.Log(strings.TrimSpace(line))
			}
		}
	}

	var events []wire.Envelope
	select {
	case events = <-held:
	case <-time.After(turnTimeout):
		t.Fatal("the held turn did not end")
	}
	for _, ev := range events {
		if ev.Type == wire.TypeSandboxExited {
			t.Fatalf("the running turn's sandbox was replaced during it: %s", ev.Data)
		}
	}
	if !slices.ContainsFunc(events, func(ev wire.Envelope) bool {
		var r wire.ToolResult
		return ev.Type == wire.TypeToolResult && ev.Decode(&r) == nil && strings.Contains(r.Output, "held")
	}) {
		t.Error("the held command's result is missing")
	}
	rep := busy.replacedBy(wire.ExitImageUpdate)
	if rep.Restored == 0 {
		t.Errorf("sandbox_replaced %+v: nothing restored", rep)
	}
	if info := e.threadInfo(busy.conn.Thread()); info.AgentVersion != newV || info.AgentHash != newHash {
		t.Errorf("the busy thread after its move runs %q %q", info.AgentVersion, info.AgentHash)
	}
	if _, done := busy.turn("hello again"); done.Reason != wire.ReasonStop {
		t.Errorf("turn after the move ended %q", done.Reason)
	}
	waitFor(t, "the rollout done", func() bool {
		st := e.rollout()
		return len(st.Images) == 1 && st.Images[0].Behind == 0 && st.Images[0].ImageID == newID
	})
	if s := e.dial(""); e.threadInfo(s.conn.Thread()).AgentVersion != newV {
		t.Error("a thread made by hello after the rollout runs the old agent")
	}
}

// A paused rollout holds idle threads on the old build (the pool still
// refills); resumed, they move.
func TestRolloutPauseResume(t *testing.T) {
	ai := newAgentImages(t)
	tag := "boxwire-e2e-rollout:" + randHex(6)
	oldV, newV := "pause-old-"+randHex(4), "pause-new-"+randHex(4)
	ai.build(tag, oldV)
	e := newEnv(t, rolloutScript)
	e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_REAP_INTERVAL=200ms", "BOXWIRE_ROLLOUT_PAUSED=1")
	e.cleanAtEnd()
	th := e.createThread(wire.CreateThread{})
	newID, _ := ai.build(tag, newV)
	waitFor(t, "the rebuild seen", func() bool {
		st := e.rollout()
		return len(st.Images) == 1 && st.Images[0].ImageID == newID && st.Images[0].Behind == 1 && st.Paused
	})
	time.Sleep(time.Second)
	if v := e.threadInfo(th.ID).AgentVersion; v != oldV {
		t.Fatalf("paused rollout moved the thread to %q", v)
	}
	code, body := e.postRollout(`{"paused":false}`)
	if code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	waitFor(t, "the thread on the new agent", func() bool { return e.threadInfo(th.ID).AgentVersion == newV })
}

// postRollout sends POST /v1/rollout.
func (e *env) postRollout(body string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.bridge.url+"/v1/rollout", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// A thread moves to another image that SIGHUP added to the allowlist
// (--images-file), keeping its workspace and conversation.
func TestRolloutMoveImageAfterReload(t *testing.T) {
	ai := newAgentImages(t)
	tag, other := "boxwire-e2e-rollout:"+randHex(6), "boxwire-e2e-rollout:"+randHex(6)
	ai.build(tag, "move-from-"+randHex(4))
	otherV := "move-to-" + randHex(4)
	ai.build(other, otherV)
	e := newEnv(t, continuityScript)
	list := filepath.Join(t.TempDir(), "images")
	if err := os.WriteFile(list, []byte("# none yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_IMAGES_FILE="+list)
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	if code, body := e.patchThread(thread, `{"image":"`+other+`"}`); code != http.StatusBadRequest || !strings.Contains(body, "not_allowed") {
		t.Fatalf("PATCH to an image not yet allowed: %d %s", code, body)
	}
	if err := os.WriteFile(list, []byte(other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.bridge.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the allowlist reloaded", func() bool { return strings.Contains(e.bridge.logText(), "image allowlist reloaded") })
	code, body := e.patchThread(thread, `{"image":"`+other+`"}`)
	if code != http.StatusOK {
		t.Fatalf("PATCH image: %d %s", code, body)
	}
	var info wire.ThreadInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Image != other {
		t.Fatalf("PATCH answer %s (%v)", body, err)
	}
	s.replacedBy(wire.ExitImageUpdate)
	if info := e.threadInfo(thread); info.Image != other || info.AgentVersion != otherV {
		t.Errorf("after the move: image %q agent %q", info.Image, info.AgentVersion)
	}
	if _, done := s.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after the move ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, nil); !ok {
		t.Errorf("the model was not sent the earlier conversation: %s", msgs)
	}
	if got := dockerExec(t, e.containerOf(thread), "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the move", got)
	}
}

// --agent-binary serves a new agent in new sandboxes with no image
// rebuild: thread info names its version and hash, and /status shows them.
func TestRolloutAgentBinary(t *testing.T) {
	v := "devbin-" + randHex(4)
	bin := agentBuild(t, v)
	hash := fileHash(t, bin)
	before := imageID(t, image)
	e := newEnv(t, rolloutScript)
	e.startBridge("BOXWIRE_AGENT_BINARY=" + bin)
	e.cleanAtEnd()
	s := e.dial("")
	info := e.threadInfo(s.conn.Thread())
	if info.AgentVersion != v || info.AgentHash != hash {
		t.Fatalf("thread runs agent %q %q, want %q %q", info.AgentVersion, info.AgentHash, v, hash)
	}
	if info.ImageID != before || imageID(t, image) != before {
		t.Errorf("image id %q, want the unchanged %q", info.ImageID, before)
	}
	if got := dockerExec(t, info.SandboxID, "/usr/local/bin/boxwire-agent", "--version"); !strings.Contains(got, v) {
		t.Errorf("the sandbox's agent binary says %q", got)
	}
	if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	p := e.startPTY("--url", e.bridge.url, "--thread", s.conn.Thread())
	p.expect("› ", startTimeout)
	p.send("/status\r")
	p.expect("agent "+v+" ("+hash[:len("sha256:")+12]+")", eventTimeout)
	p.send("\x04")
	if code := p.wait(eventTimeout); code != 0 {
		t.Errorf("client exit code %d", code)
	}
}
