package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

// fakeEnv names the scenario the test binary plays as a fake server:
// the wire's corners the SDK's server does not show (fakeServer).
const fakeEnv = "MCPCLIENT_FAKE"

// fake is the test binary as a fake server playing scenario; every line
// it reads goes to the file *log names.
func fake(t *testing.T, scenario string, log *string) *exec.Cmd {
	t.Helper()
	*log = filepath.Join(t.TempDir(), "received")
	cmd := exec.Command(os.Args[0])
	// A race-enabled binary sleeps a second at exit, unless told not to.
	cmd.Env = []string{fakeEnv + "=" + scenario, "MCPCLIENT_FAKE_LOG=" + *log, "GORACE=atexit_sleep_ms=0"}
	return cmd
}

const initResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"0"}}`

// fakeServer reads newline-delimited JSON-RPC on stdin and answers as
// scenario says:
//
//   - quirks: writes a line that is not JSON, asks the client ping and
//     roots/list before it answers initialize (with 2024-11-05), lists
//     tools over two pages, the second in a batch with a
//     tools/list_changed, and answers tools/call of boom with a JSON-RPC
//     error, of dup twice and with ids nobody asked for, of slow never;
//   - old: answers initialize with a version nobody speaks;
//   - silent: answers nothing;
//   - stubborn: ignores SIGTERM and its stdin's end;
//   - hangup: closes its stdout at tools/list;
//   - huge: answers tools/list with a line longer than MaxMessageBytes.
func fakeServer(scenario string) int {
	if scenario == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	logf, err := os.OpenFile(os.Getenv("MCPCLIENT_FAKE_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logf.Close()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }
	var initID json.RawMessage
	acks := 0
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Fprintln(logf, in.Text())
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name   string `json:"name"`
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			return 2
		}
		result := func(id json.RawMessage, res string) { say(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, res) }
		switch {
		case m.Method == "initialize" && scenario == "quirks":
			initID = m.ID
			say("fake: starting up (a log line on stdout)")
			say(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`)
			say(`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
		case m.Method == "initialize" && scenario == "old":
			result(m.ID, `{"protocolVersion":"2099-01-01","capabilities":{}}`)
		case m.Method == "initialize" && scenario != "silent":
			result(m.ID, initResult)
		case m.Method == "" && scenario == "quirks": // the client's answers to ping and roots/list
			if acks++; acks == 2 {
				result(initID, strings.Replace(initResult, "2025-11-25", "2024-11-05", 1))
			}
		case m.Method == "tools/list" && scenario == "hangup":
			os.Stdout.Close()
		case m.Method == "tools/list" && scenario == "huge":
			say(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"%s"}]}}`, m.ID, strings.Repeat("x", mcpclient.MaxMessageBytes))
		case m.Method == "tools/list" && m.Params.Cursor == "":
			result(m.ID, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"c2"}`)
		case m.Method == "tools/list":
			say(`[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"b","inputSchema":true}]}}]`, m.ID)
		case m.Method == "tools/call" && m.Params.Name == "boom":
			say(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad arguments"}}`, m.ID)
		case m.Method == "tools/call" && m.Params.Name == "dup":
			say(`{"jsonrpc":"2.0","id":999,"result":{}}`)
			say(`{"jsonrpc":"2.0","id":"x","result":{}}`)
			result(m.ID, `{"content":[{"type":"text","text":"one"},{"type":"image","mimeType":"image/png","data":"aGVsbG8="}]}`)
			result(m.ID, `{"content":[{"type":"text","text":"two"}]}`)
		}
	}
	if scenario == "stubborn" {
		time.Sleep(time.Hour)
	}
	return 0
}

// received is what the fake server read, one message a line.
func received(t *testing.T, log string) []string {
	t.Helper()
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// TestCommandQuirks: the client answers a server's requests while it
// waits for initialize, skips a line that is not JSON-RPC, speaks an
// older version, follows cursors, reads a batch, names a JSON-RPC error,
// ignores answers nobody waits for, and tells the server what it
// cancelled — every message it sent is checked as the server read it.
func TestCommandQuirks(t *testing.T) {
	var log string
	changed := make(chan struct{}, 1)
	s := dial(t, fake(t, "quirks", &log), mcpclient.CommandConfig{Client: mcpclient.Implementation{Name: "fake-test", Version: "9"},
		ListChanged: func() { changed <- struct{}{} }})
	tools, err := s.ListTools(context.Background())
	if err != nil || names(tools) != "a b" || string(mcpclient.Schema(tools[1])) != `{"type":"object","properties":{}}` {
		t.Fatalf("tools: %+v %v", tools, err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("the batch's tools/list_changed did not come")
	}
	_, err = s.CallTool(context.Background(), mcpclient.CallParams{Name: "boom", Arguments: map[string]any{"x": 1}})
	var rpcErr *mcpclient.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || err.Error() != "tools/call: bad arguments (JSON-RPC error -32602)" {
		t.Errorf("boom: %v", err)
	}
	if got := mcpclient.Text(call(t, s, "dup", nil)); got != "one\n[image image/png, 5 bytes]" {
		t.Errorf("dup: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.CallTool(ctx, mcpclient.CallParams{Name: "slow", Arguments: map[string]any{}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: %v", err)
	}
	waitFor(t, "the cancellation to reach the server", func() bool { return strings.Contains(strings.Join(received(t, log), "\n"), "cancelled") })
	want := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"fake-test","version":"9"},"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":"srv-1","result":{}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found: roots/list"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c2"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"boom","arguments":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"dup"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"slow","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"context deadline exceeded","requestId":6}}`,
	}
	if got := received(t, log); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the server read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCommandRefused: a server that speaks no version of ours, and one
// that does not answer initialize in time, are errors, and their
// commands are ended.
func TestCommandRefused(t *testing.T) {
	var log string
	_, err := mcpclient.DialCommand(context.Background(), fake(t, "old", &log), mcpclient.CommandConfig{})
	if err == nil || !strings.Contains(err.Error(), `the server speaks MCP "2099-01-01"`) {
		t.Errorf("an unknown version: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := fake(t, "silent", &log)
	if _, err := mcpclient.DialCommand(ctx, cmd, mcpclient.CommandConfig{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a silent server: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
		t.Errorf("the silent server was not ended: %v", cmd.ProcessState)
	}
}

// TestCommandStubborn: a server that ignores its stdin's end and SIGTERM
// is killed after twice TerminateWait.
func TestCommandStubborn(t *testing.T) {
	var log string
	cmd := fake(t, "stubborn", &log)
	s := dial(t, cmd, mcpclient.CommandConfig{TerminateWait: 200 * time.Millisecond})
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 10*time.Second {
		t.Errorf("Close took %s, want about 400ms", d)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the server ended %v, want killed", cmd.ProcessState)
	}
}

// TestCommandServerEnds: a server that closes its stdout, and one that
// sends a line longer than MaxMessageBytes, end the session; the call
// waiting says so.
func TestCommandServerEnds(t *testing.T) {
	for _, tc := range []struct{ scenario, want string }{
		{"hangup", "the MCP session ended: the server exited"},
		{"huge", fmt.Sprintf("the MCP session ended: the server sent a message longer than %d bytes; the server exited", mcpclient.MaxMessageBytes)},
	} {
		var log string
		s := dial(t, fake(t, tc.scenario, &log), mcpclient.CommandConfig{})
		if _, err := s.ListTools(context.Background()); !mcpclient.Ended(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.scenario, err, tc.want)
		}
	}
}
