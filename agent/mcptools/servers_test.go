package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/mcptools"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/internal/mcpclient/mcptest"
)

var mcptool string // the test MCP server (e2e/cmd/mcptool)

func TestMain(m *testing.M) { mcptest.Main(m, &mcptool) }

func servers(t *testing.T, file string) *mcptools.Servers {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := mcptools.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := mcptools.New(mcptools.Config{Servers: list, Env: []string{"PATH=" + os.Getenv("PATH"), "MCPTOOL_CANARY=not-a-secret"}, Dir: t.TempDir(), OutputLimit: 64})
	t.Cleanup(s.Close)
	return s
}

func byName(ts []tool.Tool) map[string]tool.Tool {
	m := map[string]tool.Tool{}
	for _, t := range ts {
		m[t.Name()] = t
	}
	return m
}

func run(t tool.Tool, ctx context.Context, args string) tool.Result {
	return t.Run(ctx, tool.Call{ID: "c1", Args: json.RawMessage(args)})
}

func TestServers(t *testing.T) {
	s := servers(t, fmt.Sprintf(`{"servers":[{"name":"img","command":[%q],"prefix":"img_","tools":["echo","canary","fail","crash","hang"],"env":{"MCPTOOL_CANCEL_FILE":"cancelled"}}]}`, mcptool))
	ts := byName(s.Tools(context.Background()))
	if len(ts) != 5 || ts["img_echo"] == nil || ts["img_env"] != nil {
		t.Fatalf("tools %v", ts)
	}
	if p := string(ts["img_echo"].Parameters()); !strings.Contains(p, `"text"`) || ts["img_echo"].Description() != "Echo the text back." {
		t.Errorf("echo: %s %q", p, ts["img_echo"].Description())
	}
	if r := run(ts["img_echo"], context.Background(), `{"text":"hi"}`); r.Output != "echo: hi" || r.Err != "" {
		t.Errorf("echo: %+v", r)
	}
	if r := run(ts["img_canary"], context.Background(), `{}`); r.Output != "the secret is not-a-secret" {
		t.Errorf("the server's environment: %+v", r)
	}
	if r := run(ts["img_echo"], context.Background(), `{"text":"`+strings.Repeat("x", 100)+`"}`); !r.Truncated || !strings.Contains(r.Output, "[output cut at 64 of 106 bytes]") {
		t.Errorf("a long result: %+v", r)
	}
	if r := run(ts["img_fail"], context.Background(), `{}`); r.Err != "the tool reported an error: fail: this tool always fails" {
		t.Errorf("fail: %+v", r)
	}
	if r := run(ts["img_crash"], context.Background(), `{}`); !strings.Contains(r.Err, "MCP server img ended during the call") {
		t.Errorf("crash: %+v", r)
	}
	ts = byName(s.Tools(context.Background())) // started again
	if r := run(ts["img_echo"], context.Background(), `{"text":"again"}`); r.Output != "echo: again" {
		t.Errorf("after the crash: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if r := run(ts["img_hang"], ctx, `{}`); !strings.HasPrefix(r.Err, "interrupted") {
		t.Errorf("hang: %+v", r)
	}
}

func TestBadServers(t *testing.T) {
	s := servers(t, `{"servers":[{"name":"gone","command":["/nonexistent/mcp"]}]}`)
	if ts := s.Tools(context.Background()); len(ts) != 0 {
		t.Errorf("a server that does not start offered %v", ts)
	}
	if list, err := mcptools.Load(filepath.Join(t.TempDir(), "none.json")); list != nil || err != nil {
		t.Errorf("no file: %v %v", list, err)
	}
	bad := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(bad, []byte(`{"servers":[{"name":"a"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checks are internal/mcpclient's (TestParseErrors there).
	if _, err := mcptools.Load(bad); err == nil || !strings.Contains(err.Error(), "mcp servers "+bad+`: server 1 ("a"): command: the program is missing`) {
		t.Errorf("a broken file: %v", err)
	}
}
