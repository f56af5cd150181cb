package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// mcpImage builds an image FROM the e2e image with the test MCP server
// (e2e/cmd/mcptool) declared at /etc/boxwire/mcp.json, and removes it when
// the test ends.
func mcpImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	buildMCPTool(t, dir)
	decl := `{"servers":[{"name":"img","prefix":"img_","command":["/usr/local/bin/mcptool","--name","in-image"],"tools":["echo","env"]}]}`
	df := "FROM " + image + "\nCOPY mcptool /usr/local/bin/mcptool\nCOPY mcp.json /etc/boxwire/mcp.json\n"
	for name, body := range map[string]string{"mcp.json": decl, "Dockerfile": df} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tag := "boxwire-e2e-mcp:" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v %s", tag, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v %s", tag, err, out)
		}
	})
	return tag
}

// TestImageMCPServer: an image declares an MCP server in
// /etc/boxwire/mcp.json; the agent starts it inside the sandbox, offers
// its tools (only those the file names) and the model calls one.
func TestImageMCPServer(t *testing.T) {
	tag := mcpImage(t)
	e := newEnv(t, `{"turns":[{"when":"image tool","steps":[
		{"tool_calls":[{"id":"echo","name":"img_echo","arguments":{"text":"from the image"}},{"id":"env","name":"img_env","arguments":{}}]},
		{"content":"went on"}]}]}`)
	e.startBridge("BOXWIRE_IMAGE=" + tag)
	s := e.dial("")
	events, done := s.turn("image tool")
	res := results(t, events)
	if done.Reason != wire.ReasonStop || res["echo"].Output != "echo: from the image" {
		t.Fatalf("img_echo: %+v (turn %s)", res["echo"], done.Reason)
	}
	if env := res["env"].Output; strings.Contains(env, "BOXWIRE_") || strings.Contains(env, "OPENAI") || !strings.Contains(env, "PATH") {
		t.Errorf("the in-image server's environment: %q", env)
	}
	if offered := e.offeredTools(); !offered["img_echo"] || !offered["execute"] || offered["img_crash"] {
		t.Errorf("the model was offered %v", offered)
	}
	ps := s.sh("ps -eo user,args | grep -v grep | grep mcptool", 30)
	if !strings.Contains(ps.Output, "mcptool --name in-image") || strings.Contains(ps.Output, "root") {
		t.Errorf("the server in the sandbox: %q", ps.Output)
	}
}
