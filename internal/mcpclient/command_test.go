package mcpclient_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/internal/mcpclient"
	"github.com/boxwire/boxwire/internal/mcpclient/mcptest"
)

// mcptool is the test MCP server (e2e/cmd/mcptool), written with the
// official MCP Go SDK: the command client is tested against the SDK's
// server side.
var mcptool string

func TestMain(m *testing.M) {
	if scenario := os.Getenv(fakeEnv); scenario != "" {
		os.Exit(fakeServer(scenario)) // fake_test.go
	}
	mcptest.Main(m, &mcptool)
}

// dial starts the command as a server with the test's timeouts and
// closes the session when the test ends.
func dial(t *testing.T, cmd *exec.Cmd, cfg mcpclient.CommandConfig) *mcpclient.CommandSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.TerminateWait == 0 {
		cfg.TerminateWait = 500 * time.Millisecond
	}
	s, err := mcpclient.DialCommand(ctx, cmd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func names(tools []mcpclient.Tool) string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func call(t *testing.T, s mcpclient.Session, name string, args any) *mcpclient.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), mcpclient.CallParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// TestCommandAgainstSDK: the command client's whole life with a server
// of the official SDK: handshake, tools (over pages), calls, a tool
// error, progress, cancellation reaching the server, a crash that says
// why, and Close.
func TestCommandAgainstSDK(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(mcptool, "--page-size", "2")
	cmd.Env = []string{"MCPTOOL_CANARY=c-123", "MCPTOOL_CANCEL_FILE=" + filepath.Join(dir, "cancel")}
	var mu sync.Mutex
	var progress []string
	s := dial(t, cmd, mcpclient.CommandConfig{Client: mcpclient.Implementation{Name: "test", Version: "1"},
		Progress: func(tok, msg string) { mu.Lock(); progress = append(progress, tok+":"+msg); mu.Unlock() }})

	tools, err := s.ListTools(context.Background())
	if err != nil || names(tools) != "canary crash echo env fail hang" {
		t.Fatalf("tools over pages of 2: %q %v", names(tools), err)
	}
	for _, tl := range tools {
		if tl.Name == "echo" && (tl.Description != "Echo the text back." || !strings.Contains(string(mcpclient.Schema(tl)), `"text"`)) {
			t.Errorf("echo: %+v", tl)
		}
	}
	if got := mcpclient.Text(call(t, s, "echo", map[string]any{"text": "hi"})); got != "echo: hi" {
		t.Errorf("echo: %q", got)
	}
	if got := mcpclient.Text(call(t, s, "canary", map[string]any{})); got != "the secret is c-123" {
		t.Errorf("canary: %q", got)
	}
	if res := call(t, s, "fail", map[string]any{}); !res.IsError || mcpclient.Text(res) != "fail: this tool always fails" {
		t.Errorf("fail: %+v", res)
	}
	res, err := s.CallTool(context.Background(), mcpclient.CallParams{Name: "echo", Arguments: map[string]any{"text": "p"}, ProgressToken: "tok-1"})
	mu.Lock()
	if err != nil || mcpclient.Text(res) != "echo: p" || strings.Join(progress, "|") != "tok-1:echoing" {
		t.Errorf("echo with progress: %v %v, progress %q", res, err, progress)
	}
	mu.Unlock()
	if _, err := s.CallTool(context.Background(), mcpclient.CallParams{Name: "nope", Arguments: map[string]any{}}); err == nil ||
		!strings.Contains(err.Error(), "tools/call: ") || mcpclient.Ended(err) {
		t.Errorf("an unknown tool: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.CallTool(ctx, mcpclient.CallParams{Name: "hang", Arguments: map[string]any{}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v", err)
	}
	waitFor(t, "the server to see the cancellation", func() bool {
		raw, _ := os.ReadFile(filepath.Join(dir, "cancel"))
		return string(raw) == "started\ncancelled\n"
	})
	if got := mcpclient.Text(call(t, s, "echo", map[string]any{"text": "after"})); got != "echo: after" {
		t.Errorf("after the cancellation: %q", got)
	}

	_, err = s.CallTool(context.Background(), mcpclient.CallParams{Name: "crash", Arguments: map[string]any{}})
	if !mcpclient.Ended(err) || !strings.Contains(err.Error(), "the server exited (exit status 3); its standard error ended: mcptool: crashing on purpose") {
		t.Errorf("crash: %v", err)
	}
	if err := s.Wait(); !mcpclient.Ended(err) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Wait after the crash: %v", err)
	}
	if _, err := s.ListTools(context.Background()); !mcpclient.Ended(err) {
		t.Errorf("a list after the end: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestCommandListChanged: the SDK server's tools/list_changed reaches
// ListChanged, and the next list has the new tool.
func TestCommandListChanged(t *testing.T) {
	changed := make(chan struct{}, 1)
	s := dial(t, exec.Command(mcptool, "--grow"), mcpclient.CommandConfig{ListChanged: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if got := mcpclient.Text(call(t, s, "grow", map[string]any{})); got != "added grown" {
		t.Fatalf("grow: %q", got)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after 5 s")
	}
	if tools, err := s.ListTools(context.Background()); err != nil || !strings.Contains(names(tools), "grown") {
		t.Errorf("after the change: %q %v", names(tools), err)
	}
}

// TestCommandClose: Close while a call waits ends the call with an error
// that is Ended, stops the server (stdin closed: the SDK server exits)
// and is idempotent; a call after it fails at once.
func TestCommandClose(t *testing.T) {
	cmd := exec.Command(mcptool)
	s := dial(t, cmd, mcpclient.CommandConfig{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), mcpclient.CallParams{Name: "hang", Arguments: map[string]any{}})
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !cmd.ProcessState.Exited() { // not signalled
		t.Errorf("the server ended %v; the SDK server exits when its stdin closes", cmd.ProcessState)
	}
	select {
	case err := <-errc:
		if !mcpclient.Ended(err) || !strings.Contains(err.Error(), "it was closed") {
			t.Errorf("the call in flight: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not return after Close")
	}
	_ = s.Close()
	if _, err := s.ListTools(context.Background()); !mcpclient.Ended(err) {
		t.Errorf("a list after Close: %v", err)
	}
}

// TestDialCommandFails: a command that does not start, one that exits
// at once (its words in the error) and set pipes are errors.
func TestDialCommandFails(t *testing.T) {
	ctx := context.Background()
	if _, err := mcpclient.DialCommand(ctx, exec.Command("/nonexistent/mcp"), mcpclient.CommandConfig{}); err == nil {
		t.Error("a missing program started")
	}
	_, err := mcpclient.DialCommand(ctx, exec.Command("sh", "-c", "echo usage: no such flag >&2; exit 2"), mcpclient.CommandConfig{})
	if !mcpclient.Ended(err) || !strings.Contains(err.Error(), "initialize: ") || !strings.Contains(err.Error(), "exit status 2); its standard error ended: usage: no such flag") {
		t.Errorf("a command that exits: %v", err)
	}
	cmd := exec.Command(mcptool)
	cmd.Stderr = os.Stderr
	if _, err := mcpclient.DialCommand(ctx, cmd, mcpclient.CommandConfig{}); err == nil || !strings.Contains(err.Error(), "must be unset") {
		t.Errorf("a command with its stderr set: %v", err)
	}
}

// waitFor polls cond for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for %s", what)
		}
	}
}
