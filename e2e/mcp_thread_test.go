package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// threadMCP declares, for a thread, the test MCP server the image of
// mcpImage holds, and one named like the image's own server.
const threadMCP = `{"servers":[
	{"name":"thr","prefix":"thr_","command":["/usr/local/bin/mcptool","--name","thread-declared"],
	 "tools":["echo","env"],"env":{"MCPTOOL_CANARY":"not-a-secret"}},
	{"name":"img","prefix":"clash_","command":["/usr/local/bin/mcptool","--name","clash"]}]}`

// TestThreadMCPServer: a thread's creator declares MCP servers
// (CreateThread.MCP, the schema of /etc/boxwire/mcp.json); a broken
// declaration is refused before anything is made. The agent starts the
// thread's server inside the sandbox beside the image's, as the sandbox's
// user with the same environment, and the scripted model calls both;
// the thread's server named like the image's is left out. After the
// sandbox is replaced the thread's server runs again in the new one.
func TestThreadMCPServer(t *testing.T) {
	tag := mcpImage(t) // imagemcp_test.go: mcptool at /usr/local/bin, the image's server "img"
	e := newEnv(t, `{"turns":[
		{"when":"thread tool","steps":[
			{"tool_calls":[{"id":"echo","name":"thr_echo","arguments":{"text":"from the thread"}},
				{"id":"env","name":"thr_env","arguments":{}},
				{"id":"img","name":"img_echo","arguments":{"text":"from the image"}}]},
			{"content":"went on"}]},
		{"when":"after the replacement","steps":[
			{"tool_calls":[{"id":"again","name":"thr_echo","arguments":{"text":"again"}}]},
			{"content":"still there"}]}]}`)
	e.startBridge("BOXWIRE_IMAGE=" + tag)
	e.cleanAtEnd()

	var refused apiError
	status := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{MCP: json.RawMessage(`{"servers":[{"name":"thr"}]}`)}, &refused)
	if status != http.StatusBadRequest || refused.Error.Code != wire.CodeBadMessage ||
		!strings.Contains(refused.Error.Message, `server 1 ("thr"): command: the program is missing`) {
		t.Errorf("a broken declaration: %d %+v", status, refused.Error)
	}
	if n := len(e.containers(nil)); n != 0 {
		t.Fatalf("%d sandboxes after a refused request, want 0", n)
	}

	info := e.createThread(wire.CreateThread{MCP: json.RawMessage(threadMCP)})
	s := e.dial(info.ID)
	events, done := s.turn("thread tool")
	res := results(t, events)
	if done.Reason != wire.ReasonStop || res["echo"].Output != "echo: from the thread" || res["img"].Output != "echo: from the image" {
		t.Fatalf("thr_echo %+v, img_echo %+v (turn %s)\n%s", res["echo"], res["img"], done.Reason, e.bridge.logText())
	}
	if env := res["env"].Output; !strings.Contains(env, "MCPTOOL_CANARY") || !strings.Contains(env, "PATH") ||
		strings.Contains(env, "BOXWIRE_") || strings.Contains(env, "OPENAI") {
		t.Errorf("the thread's server's environment: %q", env)
	}
	if offered := e.offeredTools(); !offered["thr_echo"] || !offered["img_echo"] || offered["clash_echo"] || offered["thr_crash"] {
		t.Errorf("the model was offered %v", offered)
	}
	ps := s.sh("ps -eo user,args | grep -v grep | grep mcptool", 30)
	if !strings.Contains(ps.Output, "mcptool --name thread-declared") || !strings.Contains(ps.Output, "mcptool --name in-image") ||
		strings.Contains(ps.Output, "--name clash") || strings.Contains(ps.Output, "root") {
		t.Errorf("the servers in the sandbox: %q", ps.Output)
	}

	killSandbox(t, e.containerOf(info.ID))
	s.awaitEvent(wire.TypeSandboxReplaced)
	events, done = s.turn("after the replacement")
	if r := results(t, events)["again"]; done.Reason != wire.ReasonStop || r.Output != "echo: again" {
		t.Errorf("after the replacement: %+v (turn %s)", r, done.Reason)
	}
}

// offeredTools are the names of the tools the scripted model was offered
// in any request so far.
func (e *env) offeredTools() map[string]bool {
	offered := map[string]bool{}
	for _, req := range e.llm.Requests() {
		for _, tl := range req.Chat.Tools {
			if tl.Function != nil {
				offered[tl.Function.Name] = true
			}
		}
	}
	return offered
}
