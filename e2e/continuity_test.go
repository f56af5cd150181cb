package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Sandboxes are replaced, never the thread lost (issue 6): after each kind
// of replacement the next model request carries the earlier conversation
// and the workspace still holds what was written before.

// A short maximum lifetime recycles the container during a thread: same
// thread, new container, same workspace, conversation handed over.
func TestContinuityMaxLifetimeRecycles(t *testing.T) {
	e := newEnv(t, continuityScript)
	e.startBridge("BOXWIRE_MAX_LIFETIME=12s", "BOXWIRE_REAP_INTERVAL=200ms")
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	// Before the turn: the recycle may come as soon as the turn ends.
	old := e.containerOf(thread)
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	rep := s.replacedBy(wire.ExitLifetime)
	if rep.Restored == 0 {
		t.Errorf("sandbox_replaced %+v: nothing restored", rep)
	}
	if _, done := s.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after the recycle ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, nil); !ok {
		t.Errorf("the model was not sent the earlier conversation: %s", msgs)
	}
	now := e.containerOf(thread)
	if now == old {
		t.Fatalf("still container %s after the recycle", old)
	}
	if got := dockerExec(t, now, "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the recycle", got)
	}
}

// Idle TTL suspends a thread nobody uses: no container, the volume and log
// kept, status suspended; a client attaching again resumes it with its
// history and workspace.
func TestContinuityIdleSuspendsAndResumes(t *testing.T) {
	e := newEnv(t, continuityScript)
	e.startBridge("BOXWIRE_IDLE_TTL=3s", "BOXWIRE_REAP_INTERVAL=200ms")
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	s.conn.Close()
	waitFor(t, "the thread to be suspended", func() bool {
		return e.threadInfo(thread).Status == wire.SandboxSuspended &&
			len(e.containers(map[string]string{"boxwire.thread": thread})) == 0
	})
	if vols := e.volumes(); !slices.Contains(vols, "boxwire-ws-"+thread) {
		t.Fatalf("volumes %v: the suspended thread's workspace is gone", vols)
	}
	// A file transfer resumes the thread too: the real client copies the
	// file written before the suspension out of the workspace.
	local := t.TempDir()
	if _, errOut, code := e.runClient("--url", e.bridge.url, "cp", thread+":/workspace/n", local); code != 0 {
		t.Fatalf("client cp from the suspended thread: exit %d: %s", code, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(local, "n")); err != nil || string(got) != "42\n" {
		t.Errorf("copied n = %q, %v; want 42", got, err)
	}
	s2 := e.dial(thread)
	var ex wire.SandboxExited
	mustDecode(t, s2.awaitEvent(wire.TypeSandboxExited), &ex)
	var rep wire.SandboxReplaced
	mustDecode(t, s2.awaitEvent(wire.TypeSandboxReplaced), &rep)
	if ex.Reason != wire.ExitIdle || rep.Reason != wire.ExitIdle || rep.Restored == 0 {
		t.Errorf("sandbox_exited %+v, sandbox_replaced %+v: want idle, history restored", ex, rep)
	}
	if _, done := s2.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after the resume ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, nil); !ok {
		t.Errorf("the model was not sent the earlier conversation: %s", msgs)
	}
	if got := dockerExec(t, e.containerOf(thread), "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the resume", got)
	}
	if st := e.threadInfo(thread).Status; st != wire.SandboxRunning {
		t.Errorf("status %s after the resume", st)
	}
}

// A rebuilt image under the thread's image reference moves idle threads to
// the new image id, with sandbox_replaced reason image_update.
func TestContinuityImageUpdate(t *testing.T) {
	tag := testTag(t) // removed after cleanAtEnd's gc
	e := newEnv(t, continuityScript)
	e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_REAP_INTERVAL=200ms")
	e.cleanAtEnd()
	idle := e.createThread(wire.CreateThread{})
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	before := imageID(t, tag)
	if got := e.threadInfo(thread).ImageID; got != before {
		t.Fatalf("thread runs image %q, want %q", got, before)
	}
	after := rebuild(t, tag)
	if after == before {
		t.Fatal("the rebuild made no new image")
	}
	rep := s.replacedBy(wire.ExitImageUpdate)
	if rep.Restored == 0 {
		t.Errorf("sandbox_replaced %+v: nothing restored", rep)
	}
	for _, id := range []string{thread, idle.ID} {
		waitFor(t, "thread "+id+" on the new image", func() bool { return e.threadInfo(id).ImageID == after })
	}
	if _, done := s.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after the update ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, nil); !ok {
		t.Errorf("the model was not sent the earlier conversation: %s", msgs)
	}
	if got := dockerExec(t, e.containerOf(thread), "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the update", got)
	}
}

// An assistant's shared sandbox killed with docker kill is recreated once;
// both threads go on, each with its own history only.
func TestContinuityAssistantSandboxKilled(t *testing.T) {
	e := newEnv(t, continuityScript)
	e.startBridge()
	e.cleanAtEnd()
	a := e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-c"})
	b := e.createThread(wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper-c"})
	sa, sb := e.dial(a.ID), e.dial(b.ID)
	if _, done := sa.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn in a ended %q", done.Reason)
	}
	if _, done := sb.turn("my color is blue"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn in b ended %q", done.Reason)
	}
	if out, err := exec.Command("docker", "kill", "-s", "KILL", a.SandboxID).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	ra, rb := sa.replacedBy(wire.ExitOOM), sb.replacedBy(wire.ExitOOM) // 137: reported as a likely OOM kill
	if ra.SandboxID != rb.SandboxID {
		t.Errorf("threads replaced into %s and %s, want one shared sandbox", ra.SandboxID, rb.SandboxID)
	}
	if n := len(e.containers(map[string]string{"boxwire.assistant": "helper-c"})); n != 1 {
		t.Errorf("%d sandboxes for the assistant, want 1", n)
	}
	if _, done := sa.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn in a ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"remember the number 42"}, []string{"my color is blue"}); !ok {
		t.Errorf("thread a's model request: %s", msgs)
	}
	if _, done := sb.turn("which color did I tell you?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn in b ended %q", done.Reason)
	}
	if ok, msgs := e.lastChatHas([]string{"my color is blue"}, []string{"remember the number 42"}); !ok {
		t.Errorf("thread b's model request: %s", msgs)
	}
	if got := dockerExec(t, e.containers(map[string]string{"boxwire.assistant": "helper-c"})[0].ID, "cat", "/workspace/n"); got != "42\n" {
		t.Errorf("/workspace/n = %q after the replacement", got)
	}
}

// continuityScript answers the continuity scenarios: a number and a color
// to remember (the number also goes into /workspace/n) and questions about
// them.
const continuityScript = `{"model":"scripted","turns":[
  {"when":"remember the number","steps":[
    {"content":"Writing it down.","tool_calls":[{"name":"execute","arguments":{"command":"echo 42 > /workspace/n"}}]},
    {"content":"Noted: the number is 42."}
  ]},
  {"when":"my color is","steps":[{"content":"Noted: the color is blue."}]},
  {"when":"which number","steps":[{"content":"It was 42."}]},
  {"when":"which color","steps":[{"content":"It was blue."}]},
  {"steps":[{"content":"ok"}]}
]}`
