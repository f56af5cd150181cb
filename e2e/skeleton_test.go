package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

const helloScript = `{"model":"scripted","turns":[
  {"when":"hello","steps":[
    {"content":"I will write the file.","tool_calls":[{"name":"execute","arguments":{"command":"echo hello > /workspace/x && cat /workspace/x"}}]},
    {"content":"The file /workspace/x now says hello."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`

// The walking skeleton, end to end: a chat turn in which the model runs a
// command in a real sandbox, with output streamed back and the key kept out.
func TestChatTurnRunsCommandInSandbox(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	if !strings.HasPrefix(thread, "t_") {
		t.Fatalf("thread id %q", thread)
	}

	events, done := s.turn("hello, please write a file")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}

	var streamed strings.Builder
	var result wire.ToolResult
	var final string
	var lastSeq uint64
	for _, ev := range events {
		if ev.Seq != lastSeq+1 && lastSeq != 0 {
			t.Errorf("seq jumped from %d to %d at %s", lastSeq, ev.Seq, ev.Type)
		}
		lastSeq = ev.Seq
		switch ev.Type {
		case wire.TypeToolOutput:
			var out wire.ToolOutput
			mustDecode(t, ev, &out)
			streamed.WriteString(out.Output)
		case wire.TypeToolResult:
			mustDecode(t, ev, &result)
		case wire.TypeAssistantMessage:
			var msg wire.Text
			mustDecode(t, ev, &msg)
			final = msg.Text
		}
	}
	if !strings.Contains(streamed.String(), "hello") {
		t.Errorf("streamed tool output %q lacks hello", streamed.String())
	}
	if result.ExitCode == nil || *result.ExitCode != 0 {
		t.Errorf("tool result %+v: want exit 0", result)
	}
	if final != "The file /workspace/x now says hello." {
		t.Errorf("final answer %q", final)
	}

	// The file is really in the sandbox.
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes for thread %s, want 1", len(boxes), thread)
	}
	if got := dockerExec(t, boxes[0].ID, "cat", "/workspace/x"); got != "hello\n" {
		t.Errorf("/workspace/x = %q", got)
	}

	// The model was called through the bridge's proxy, which added the key;
	// the key is nowhere in the sandbox's environment.
	reqs := e.llm.Requests()
	if len(reqs) != 2 {
		t.Errorf("model was called %d times, want 2", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+e.apiKey {
			t.Errorf("model request carried Authorization %q", got)
		}
	}
	if envOut := dockerExec(t, boxes[0].ID, "env"); strings.Contains(envOut, e.apiKey) {
		t.Error("the API key is in the sandbox's environment")
	}
	inspect := dockerExec(t, boxes[0].ID, "cat", "/proc/1/environ")
	if strings.Contains(inspect, e.apiKey) {
		t.Error("the API key is in PID 1's environment")
	}

	// Deleting the thread removes its sandbox.
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := chat.DeleteThread(ctx, chat.Config{URL: e.bridge.url, Token: e.token}, thread); err != nil {
		t.Fatalf("delete thread: %v", err)
	}
	if left := e.containers(map[string]string{"boxwire.thread": thread}); len(left) != 0 {
		t.Errorf("%d containers left after deleting the thread", len(left))
	}
}

func TestBridgeRequiresToken(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	for name, token := range map[string]string{"none": "", "wrong": "not-the-token"} {
		t.Run(name, func(t *testing.T) {
			resp := httpGet(t, e.bridge.url+wire.Path, token)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	_, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: "wrong"})
	if !errors.Is(err, chat.ErrUnauthorized) {
		t.Fatalf("dial with a wrong token: %v, want ErrUnauthorized", err)
	}
	if n := len(e.containers(nil)); n != 0 {
		t.Fatalf("%d sandboxes created by unauthorized clients", n)
	}
}

func TestUnknownMessageTypeKeepsConnection(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()

	if err := s.conn.Send(ctx, wire.Envelope{Type: "launch_rockets", ID: "x1"}); err != nil {
		t.Fatal(err)
	}
	ev := s.awaitEvent(wire.TypeError)
	var werr wire.Error
	mustDecode(t, ev, &werr)
	if werr.Code != wire.CodeUnknownType || ev.ID != "x1" {
		t.Fatalf("got %+v (id %q), want unknown_type for x1", werr, ev.ID)
	}
	// The connection still works: a round trip to the agent and a turn.
	if _, err := s.conn.Ping(ctx); err != nil {
		t.Fatalf("ping after the error: %v", err)
	}
	if _, done := s.turn("anything"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after the error ended %q", done.Reason)
	}
}

func TestMissingEngineIsAClearError(t *testing.T) {
	e := newEnv(t, helloScript)
	start := time.Now()
	b, err := e.launchBridge("DOCKER_HOST=unix:///nonexistent/docker.sock")
	if err == nil {
		b.stop(t)
		t.Fatal("the bridge started without an engine")
	}
	if !strings.Contains(strings.ToLower(b.logText()), "engine") {
		t.Errorf("the bridge's error does not mention the engine:\n%s", b.logText())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("it took %v to notice the engine is missing", took)
	}
}

// SIGTERM leaves the sandbox for the next start to adopt; `bridge gc`
// removes it with its volume.
func TestStoppingBridgeLeavesSandboxesForGC(t *testing.T) {
	e := newEnv(t, helloScript)
	b := e.startBridge()
	s := e.dial("")
	if n := len(e.containers(map[string]string{"boxwire.thread": s.conn.Thread()})); n != 1 {
		t.Fatalf("%d sandboxes for the new thread, want 1", n)
	}
	b.stop(t)
	if b.err != nil {
		t.Errorf("bridge exit: %v", b.err)
	}
	if n := len(e.containers(nil)); n != 1 {
		t.Fatalf("%d sandboxes left after SIGTERM, want the one to adopt", n)
	}
	e.runGC()
	e.assertClean()
}
