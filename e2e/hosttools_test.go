package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// buildMCPTool builds the test MCP server (e2e/cmd/mcptool) into dir,
// static, so that it runs on the host and in an image alike.
func buildMCPTool(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "mcptool")
	build := exec.Command("go", "build", "-o", bin, "github.com/boxwire/boxwire/e2e/cmd/mcptool")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mcptool: %v\n%s", err, out)
	}
	return bin
}

// hostToolsRig is a bridge with the test MCP server as a host tool
// (prefix mcp_), a canary secret in its environment, and a policy that
// denies mcp_env and asks before mcp_echo of text "ask*".
type hostToolsRig struct {
	e          *env
	canary     string
	cancelFile string
}

func newHostToolsRig(t *testing.T) *hostToolsRig {
	dir := t.TempDir()
	r := &hostToolsRig{canary: "host-canary-" + randHex(10), cancelFile: filepath.Join(dir, "cancelled")}
	call := func(id, name, args string) string {
		return fmt.Sprintf(`{"id":%q,"name":%q,"arguments":%s}`, id, name, args)
	}
	turn := func(when string, calls ...string) string {
		return fmt.Sprintf(`{"when":%q,"steps":[{"tool_calls":[%s]},{"content":"went on"}]}`, when, strings.Join(calls, ","))
	}
	script := `{"turns":[` + strings.Join([]string{
		turn("host list", call("echo", "mcp_echo", `{"text":"hi"}`), call("canary", "mcp_canary", `{}`)),
		turn("host deny", call("env", "mcp_env", `{}`)),
		turn("host ask", call("ask", "mcp_echo", `{"text":"ask me"}`)),
		turn("host hang", call("hang", "mcp_hang", `{}`)),
		turn("host crash", call("crash", "mcp_crash", `{}`), call("after", "mcp_echo", `{"text":"after the crash"}`)),
		turn("redact for model", call("redact", "execute", `{"command":"echo internal-id-123456 sk-abcdefghijklmnopqrstuv; echo plain"}`)),
	}, ",") + `]}`
	r.e = newEnv(t, script)
	tools := fmt.Sprintf(`{"servers":[{"name":"mcp","prefix":"mcp_","command":[%q],
		"env":{"MCPTOOL_CANCEL_FILE":%q},"env_from":{"MCPTOOL_CANARY":"E2E_HOST_CANARY"}}]}`, buildMCPTool(t, dir), r.cancelFile)
	pol := `{"rules":[{"tool":"mcp_env","action":"deny","reason":"no env for you"},
		{"tool":"mcp_echo","args":{"text":"ask*"},"action":"ask"}],"approval_timeout":"30s",
		"redact_patterns":["internal-id-[0-9]{6}"]}`
	toolsFile, polFile := filepath.Join(dir, "host-tools.json"), filepath.Join(dir, "policy.json")
	for path, body := range map[string]string{toolsFile: tools, polFile: pol} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.e.startBridge("BOXWIRE_HOST_TOOLS="+toolsFile, "BOXWIRE_POLICY="+polFile, "E2E_HOST_CANARY="+r.canary)
	return r
}

// TestHostTools runs a host tool (a real MCP server on the host, with a
// canary secret in its environment) through the real bridge, agent and
// scripted model: listed and called, its secret redacted everywhere and
// absent from the sandbox; denied by policy; approved and denied by a
// person; a hanging call cancelled on the server by the turn's
// interrupt; a crashing server a clear tool_result error, the turn going on;
// and the policy's patterns and key shapes masked in tool output before the
// model sees it, the model told.
func TestHostTools(t *testing.T) {
	r := newHostToolsRig(t)
	s := r.e.dial("")

	t.Run("list and call", func(t *testing.T) {
		events, done := s.turn("host list")
		res := results(t, events)
		if done.Reason != wire.ReasonStop || res["echo"].Output != "echo: hi" || res["echo"].Error != "" {
			t.Fatalf("echo: %+v (turn %s)", res["echo"], done.Reason)
		}
		if out := res["canary"].Output; !strings.HasPrefix(out, "the secret is [REDACTED]") || !strings.Contains(out, "1 secret(s) in this result were replaced") {
			t.Errorf("canary result: %q", out)
		}
		if !strings.Contains(toolText(t, events), "echoing") { // MCP progress is not ordered with results
			t.Logf("the server's progress did not stream as tool_output: %q", toolText(t, events))
		}
		offered := false
		for _, req := range r.e.llm.Requests() {
			for _, tl := range req.Chat.Tools {
				if tl.Function != nil && tl.Function.Name == "mcp_echo" && tl.Function.Description == "Echo the text back." {
					offered = true
				}
			}
			if bytes.Contains(req.Body, []byte(r.canary)) {
				t.Errorf("the model was sent the canary")
			}
		}
		if !offered {
			t.Errorf("the model was not offered mcp_echo with its description")
		}
	})

	t.Run("denied by policy", func(t *testing.T) {
		events, _ := s.turn("host deny")
		if got := results(t, events)["env"]; !strings.Contains(got.Error, "not run:") || !strings.Contains(got.Error, "no env for you") {
			t.Errorf("denied call: %+v", got)
		}
	})

	for _, answer := range []wire.Type{wire.TypeApprove, wire.TypeDeny} {
		t.Run("approval "+string(answer), func(t *testing.T) {
			asked := 0
			events := s.turnAnswering("host ask", func(req wire.ApprovalRequest) wire.Type {
				asked++
				if req.Kind != wire.ApprovalTool || req.Tool != "mcp_echo" || !strings.Contains(string(req.Arguments), "ask me") {
					t.Errorf("approval request %+v", req)
				}
				return answer
			})
			got := results(t, events)["ask"]
			switch {
			case asked != 1:
				t.Errorf("%d approval requests", asked)
			case answer == wire.TypeApprove && got.Output != "echo: ask me":
				t.Errorf("approved call: %+v", got)
			case answer == wire.TypeDeny && (!strings.Contains(got.Error, "not run: denied by c") || got.Output != ""):
				t.Errorf("denied call: %+v", got)
			}
		})
	}

	t.Run("interrupt cancels", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
		defer cancel()
		id, err := s.conn.SendMessage(ctx, "host hang")
		if err != nil {
			t.Fatal(err)
		}
		s.awaitEvent(wire.TypeToolCall)
		testutil.Eventually(t, "the MCP server runs the call", eventTimeout, func() bool {
			b, _ := os.ReadFile(r.cancelFile)
			return strings.Contains(string(b), "started")
		})
		if err := s.conn.Send(ctx, wire.MustNew(wire.TypeInterrupt, s.conn.Thread(), "int-1", nil)); err != nil {
			t.Fatal(err)
		}
		var res wire.ToolResult
		mustDecode(t, s.awaitEvent(wire.TypeToolResult), &res)
		if res.CallID != "hang" || res.Error == "" {
			t.Errorf("interrupted call: %+v", res)
		}
		var done wire.TurnDone
		ev := s.awaitEvent(wire.TypeTurnDone)
		mustDecode(t, ev, &done)
		if done.Reason != wire.ReasonInterrupted || ev.ID != id {
			t.Errorf("turn_done %+v", done)
		}
		testutil.Eventually(t, "the MCP server saw the call cancelled", eventTimeout, func() bool {
			b, _ := os.ReadFile(r.cancelFile)
			return strings.Contains(string(b), "cancelled")
		})
	})

	t.Run("crash", func(t *testing.T) {
		events, done := s.turn("host crash")
		res := results(t, events)
		if e := res["crash"].Error; !strings.Contains(e, "host tool server mcp ended during the call") || !strings.Contains(e, "crashing on purpose") {
			t.Errorf("crash result: %+v", res["crash"])
		}
		if res["after"].Output != "echo: after the crash" || done.Reason != wire.ReasonStop {
			t.Errorf("after the crash: %+v, turn %s", res["after"], done.Reason)
		}
	})

	t.Run("redacted for the model", func(t *testing.T) {
		events, _ := s.turn("redact for model")
		if out := results(t, events)["redact"].Output; strings.Contains(out, "internal-id-123456") || !strings.Contains(out, "plain") {
			t.Errorf("the tool_result clients see: %q", out)
		}
		seen := ""
		for _, req := range r.e.llm.Requests() {
			for _, m := range req.Chat.Messages {
				if m.Role == "tool" && m.ToolCallID == "redact" {
					seen = m.Content
				}
			}
		}
		if seen == "" || strings.Contains(seen, "internal-id-123456") || strings.Contains(seen, "sk-abcdefghijklmnopqrstuv") ||
			!strings.Contains(seen, "plain") || !strings.Contains(seen, "[boxwire: 2 secret(s) in this tool output were replaced by [REDACTED]") {
			t.Errorf("the model saw: %q", seen)
		}
	})

	t.Run("canary absent", func(t *testing.T) {
		thread := s.conn.Thread()
		if where := r.e.sandboxHolds(thread, r.canary); where != "" {
			t.Errorf("the sandbox holds the canary:\n%s", where)
		}
		if where := r.e.sandboxMemoryHolds(thread, r.canary); where != "" {
			t.Errorf("a sandbox process's memory holds the canary: %s", where)
		}
		var export bytes.Buffer
		if code := r.e.apiRaw(http.MethodGet, "/v1/threads/"+thread+"/events", &export); code != http.StatusOK {
			t.Fatalf("export: %d", code)
		}
		if bytes.Contains(export.Bytes(), []byte(r.canary)) || !bytes.Contains(export.Bytes(), []byte("mcp_canary")) {
			t.Errorf("the events: canary there %v, the call there %v", bytes.Contains(export.Bytes(), []byte(r.canary)), bytes.Contains(export.Bytes(), []byte("mcp_canary")))
		}
		if strings.Contains(r.e.bridge.logText(), r.canary) {
			t.Errorf("the bridge's log holds the canary")
		}
	})
}

// results are a turn's tool results by call id.
func results(t *testing.T, events []wire.Envelope) map[string]wire.ToolResult {
	t.Helper()
	out := map[string]wire.ToolResult{}
	for _, r := range ofType[wire.ToolResult](t, events, wire.TypeToolResult) {
		out[r.CallID] = r
	}
	return out
}

// apiRaw sends an authenticated request without a body and copies the
// answer into w; it returns the status.
func (e *env) apiRaw(method, path string, w io.Writer) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.bridge.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode
}

// sandboxMemoryHolds searches the readable memory of every process of the
// thread's sandbox (the agent's too, read from the host) for secret; it
// names the processes that hold it.
func (e *env) sandboxMemoryHolds(thread, secret string) string {
	e.t.Helper()
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		e.t.Fatalf("want 1 sandbox for thread %s, have %d", thread, len(boxes))
	}
	pids, err := exec.Command("docker", "top", boxes[0].ID, "-eo", "pid,comm").Output()
	if err != nil {
		e.t.Fatalf("list sandbox processes: %v", err)
	}
	var where []string
	scanned := 0
	lines := strings.Split(strings.TrimSpace(string(pids)), "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		found, n, err := memHolds(pid, []byte(secret))
		if err != nil {
			continue // exited since
		}
		scanned += n
		if found {
			where = append(where, f[1]+" (host pid "+f[0]+")")
		}
	}
	if scanned == 0 {
		e.t.Fatalf("read no memory of sandbox %s", boxes[0].ID)
	}
	return strings.Join(where, ", ")
}

// memHolds reports whether the readable mappings of pid hold needle; n
// is how many bytes were read.
func memHolds(pid int, needle []byte) (found bool, n int, err error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false, 0, err
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return false, 0, err
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil || hi-lo > 1<<30 {
			continue
		}
		buf := make([]byte, hi-lo)
		k, _ := mem.ReadAt(buf, int64(lo))
		n += k
		if bytes.Contains(buf[:k], needle) {
			return true, n, nil
		}
	}
	return false, n, sc.Err()
}
