package hosttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient/mcptest"
)

// mcptool is the test MCP server (e2e/cmd/mcptool), built once.
var mcptool string

func TestMain(m *testing.M) { mcptest.Main(m, &mcptool) }

const canary = "canary-3f9a1c7d5e2b"

// newHost runs mcptool as a stdio server with the canary in its
// environment; file is the server's cancel file.
func newHost(t *testing.T, extra string) (h *hosttools.Host, cancelFile string) {
	t.Helper()
	cancelFile = filepath.Join(t.TempDir(), "cancelled")
	raw := fmt.Sprintf(`{"servers":[{"name":"tool","command":[%q],"env":{"MCPTOOL_CANCEL_FILE":%q},
		"env_from":{"MCPTOOL_CANARY":"HOST_CANARY"}, "prefix":"t_"%s}]}`, mcptool, cancelFile, extra)
	env := map[string]string{"HOST_CANARY": canary, "PATH": os.Getenv("PATH"), "BOXWIRE_TOKEN": "bridge-token-123456"}
	servers, err := hosttools.Parse([]byte(raw), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	h = hosttools.New(hosttools.Config{Servers: servers, Secrets: []string{"bridge-token-123456"}, Getenv: func(k string) string { return env[k] }})
	t.Cleanup(func() { h.Close() })
	return h, cancelFile
}

func call(h *hosttools.Host, name, args string) (wire.HostResult, []string) {
	var mu sync.Mutex
	var progress []string
	res := h.Call(context.Background(), hosttools.Scope{Thread: "t_1"}, wire.HostCall{CallID: "call_1", Name: name, Arguments: json.RawMessage(args)},
		func(m string) { mu.Lock(); progress = append(progress, m); mu.Unlock() })
	mu.Lock()
	defer mu.Unlock()
	return res, progress
}

func TestToolsAndCalls(t *testing.T) {
	h, _ := newHost(t, "")
	list := h.Tools(context.Background(), hosttools.Scope{Thread: "t_1"})
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "t_echo" && (tl.Description != "Echo the text back." || !strings.Contains(string(tl.InputSchema), `"text"`)) {
			t.Errorf("echo's definition: %+v", tl)
		}
	}
	if got := strings.Join(names, " "); got != "t_canary t_crash t_echo t_env t_fail t_hang" || len(list.Errors) > 0 {
		t.Fatalf("tools %q, errors %v", got, list.Errors)
	}

	res, progress := call(h, "t_echo", `{"text":"hi"}`)
	if res.Output != "echo: hi" || res.Error != "" || strings.Join(progress, "|") != "echoing" {
		t.Errorf("echo: %+v, progress %q", res, progress)
	}
	res, _ = call(h, "t_canary", `{}`)
	if strings.Contains(res.Output, canary) || res.Output != "the secret is [REDACTED]" || res.Redacted != 1 {
		t.Errorf("canary not redacted: %+v", res)
	}
	res, _ = call(h, "t_env", `{}`)
	if strings.Contains(res.Output, "BOXWIRE_TOKEN") || !strings.Contains(res.Output, "MCPTOOL_CANARY") || !strings.Contains(res.Output, "PATH") {
		t.Errorf("the command's environment: %q", res.Output)
	}
	res, _ = call(h, "t_fail", `{}`)
	if !strings.HasPrefix(res.Error, "the tool reported an error: fail: this tool always fails") {
		t.Errorf("fail: %+v", res)
	}
	res, _ = call(h, "echo", `{}`)
	if res.Error != `"echo" is not a host tool this thread may use` {
		t.Errorf("unprefixed name: %+v", res)
	}
	res, _ = call(h, "t_echo", `[1]`)
	if !strings.HasPrefix(res.Error, "the arguments are not a JSON object") {
		t.Errorf("bad arguments: %+v", res)
	}
}

func TestCrashAndRestart(t *testing.T) {
	h, _ := newHost(t, "")
	res, _ := call(h, "t_crash", `{}`)
	if !strings.Contains(res.Error, "host tool server tool ended during the call") || !strings.Contains(res.Error, "crashing on purpose") {
		t.Fatalf("crash: %+v", res)
	}
	res, _ = call(h, "t_echo", `{"text":"again"}`)
	if res.Output != "echo: again" {
		t.Fatalf("after the crash: %+v", res)
	}
}

func TestCancel(t *testing.T) {
	h, cancelFile := newHost(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan wire.HostResult, 1)
	go func() {
		done <- h.Call(ctx, hosttools.Scope{}, wire.HostCall{CallID: "call_h", Name: "t_hang", Arguments: json.RawMessage(`{}`)}, nil)
	}()
	testutil.Eventually(t, "the server runs the call", 10*time.Second, func() bool {
		b, _ := os.ReadFile(cancelFile)
		return strings.Contains(string(b), "started")
	})
	cancel()
	res := testutil.RequireReceive(t, "the cancelled call's result", done, 10*time.Second)
	if !strings.HasPrefix(res.Error, "cancelled: the turn was interrupted") {
		t.Errorf("cancelled: %+v", res)
	}
	testutil.Eventually(t, "the server saw notifications/cancelled", 10*time.Second, func() bool {
		b, _ := os.ReadFile(cancelFile)
		return strings.Contains(string(b), "cancelled")
	})
}

func TestTimeout(t *testing.T) {
	h, _ := newHost(t, `, "timeout": "300ms"`)
	res, _ := call(h, "t_hang", `{}`)
	if res.Error != "cancelled: the call took longer than its timeout of 300ms" {
		t.Errorf("timeout: %+v", res)
	}
}

func TestLimits(t *testing.T) {
	h, _ := newHost(t, `, "images": ["boxwire:mcp*"], "users": ["alice"], "tools": ["echo"]`)
	if l := h.Tools(context.Background(), hosttools.Scope{Image: "boxwire:latest", User: "alice"}); len(l.Tools) != 0 {
		t.Errorf("another image got %+v", l.Tools)
	}
	if l := h.Tools(context.Background(), hosttools.Scope{Image: "boxwire:mcp", User: "bob"}); len(l.Tools) != 0 {
		t.Errorf("another user got %+v", l.Tools)
	}
	l := h.Tools(context.Background(), hosttools.Scope{Image: "boxwire:mcp", User: "alice"})
	if len(l.Tools) != 1 || l.Tools[0].Name != "t_echo" {
		t.Errorf("alice on boxwire:mcp got %+v", l.Tools)
	}
	res := h.Call(context.Background(), hosttools.Scope{Image: "boxwire:latest", User: "alice"}, wire.HostCall{Name: "t_echo", Arguments: json.RawMessage(`{"text":"x"}`)}, nil)
	if !strings.Contains(res.Error, "not a host tool this thread may use") {
		t.Errorf("a call outside the limits: %+v", res)
	}
}

func TestStreamableHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(mcptool, "--http", addr)
	cmd.Env = append(os.Environ(), "MCPTOOL_HTTP_TOKEN=http-secret-abcdef", "MCPTOOL_CANARY=http-canary-value")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.Eventually(t, "the HTTP server listens", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	mk := func(header string) *hosttools.Host {
		raw := fmt.Sprintf(`{"servers":[{"name":"web","url":"http://%s/mcp","headers_from":{"Authorization":"WEB_AUTH"}}]}`, addr)
		servers, err := hosttools.Parse([]byte(raw), func(string) string { return header })
		if err != nil {
			t.Fatal(err)
		}
		h := hosttools.New(hosttools.Config{Servers: servers, Secrets: []string{"http-canary-value"}})
		t.Cleanup(func() { h.Close() })
		return h
	}
	h := mk("Bearer http-secret-abcdef")
	if l := h.Tools(context.Background(), hosttools.Scope{}); len(l.Tools) != 6 {
		t.Fatalf("the HTTP server's tools: %+v", l)
	}
	res, _ := call(h, "echo", `{"text":"over http"}`)
	if res.Output != "echo: over http" {
		t.Errorf("echo over HTTP: %+v", res)
	}
	res, _ = call(h, "canary", `{}`)
	if res.Output != "the secret is [REDACTED]" {
		t.Errorf("the bridge's secret over HTTP: %+v", res)
	}
	bad := mk("Bearer wrong-token-000000")
	l := bad.Tools(context.Background(), hosttools.Scope{})
	if len(l.Tools) != 0 || len(l.Errors) != 1 || !strings.HasPrefix(l.Errors[0], "web: ") || strings.Contains(l.Errors[0], "wrong-token-000000") {
		t.Errorf("a refused credential: %+v", l)
	}
}

func TestParseErrors(t *testing.T) {
	getenv := func(k string) string {
		if k == "SET" {
			return "value-123456"
		}
		return ""
	}
	for _, tc := range []struct{ raw, want string }{
		{`{`, "not a host tools file"},
		{`{"servers":[]}`, "no servers"},
		{`{"servers":[{"name":"a b","command":["x"]}]}`, "name must be"},
		{`{"servers":[{"name":"a"}]}`, "set command (a stdio server) or url"},
		{`{"servers":[{"name":"a","command":["x"],"url":"http://h"}]}`, "set command or url, not both"},
		{`{"servers":[{"name":"a","url":"ftp://h"}]}`, `url "ftp://h" is not an http or https URL`},
		{`{"servers":[{"name":"a","url":"http://h","env":{"A":"b"}}]}`, "env, env_from and dir are for a command"},
		{`{"servers":[{"name":"a","command":["x"],"headers":{"A":"b"}}]}`, "headers and headers_from are for a url"},
		{`{"servers":[{"name":"a","command":["x"],"env_from":{"A":"UNSET"}}]}`, "env_from: A names UNSET, which is not set"},
		{`{"servers":[{"name":"a","command":["x"],"timeout":"soon"}]}`, `timeout "soon" is not a positive duration`},
		{`{"servers":[{"name":"a","command":["x"],"images":["["]}]}`, `images: "[" is not a glob`},
		{`{"servers":[{"name":"a","command":["x"],"prefix":"a.b"}]}`, `prefix "a.b"`},
		{`{"servers":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}`, `the name "a" is used twice`},
		{`{"servers":[{"name":"a","command":["x"],"secret":"y"}]}`, `unknown field "secret"`},
	} {
		_, err := hosttools.Parse([]byte(tc.raw), getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.raw, err, tc.want)
		}
	}
	if _, err := hosttools.Load(filepath.Join(t.TempDir(), "missing.json"), getenv); err == nil || !strings.Contains(err.Error(), "host tools:") {
		t.Errorf("missing file: %v", err)
	}
}

// TestUnreachable: a server that cannot be started is named in the list's
// errors, its tools are missing, a call says why, and it is not tried
// again for a while (a dead server does not hold up every turn).
func TestUnreachable(t *testing.T) {
	servers, err := hosttools.Parse([]byte(`{"servers":[{"name":"gone","command":["/nonexistent/mcp-server"]}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := hosttools.New(hosttools.Config{Servers: servers})
	t.Cleanup(func() { h.Close() })
	l := h.Tools(context.Background(), hosttools.Scope{})
	if len(l.Tools) != 0 || len(l.Errors) != 1 || !strings.HasPrefix(l.Errors[0], "gone: connect:") {
		t.Fatalf("first list: %+v", l)
	}
	l = h.Tools(context.Background(), hosttools.Scope{})
	if len(l.Errors) != 1 || !strings.Contains(l.Errors[0], "ago; again after 15s)") {
		t.Errorf("second list: %+v", l)
	}
	if res := h.Call(context.Background(), hosttools.Scope{}, wire.HostCall{Name: "anything"}, nil); !strings.Contains(res.Error, "not a host tool") {
		t.Errorf("a call: %+v", res)
	}
}
