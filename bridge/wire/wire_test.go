package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func intp(i int) *int { return &i }

// golden lists examples of the messages no test of the code that sends
// them produces. The agent's messages (events of a turn, tool results,
// pong, its hello, its errors) are golden files too, written and checked
// by agent/session's TestGoldenAgent from what the real agent sends; every
// file in testdata is checked by TestGoldenFiles.
var golden = []struct {
	name string
	env  wire.Envelope
}{
	{"hello_client", wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t_4f9c2a1b3c5d", AfterSeq: 12})},
	{"hello_bridge", wire.MustNew(wire.TypeHello, "t_4f9c2a1b3c5d", "", wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Software: "boxwire-bridge/0.1.0", Thread: "t_4f9c2a1b3c5d", AfterSeq: 12})},
	{"user_message", wire.MustNew(wire.TypeUserMessage, "t_4f9c2a1b3c5d", "m1", wire.UserMessage{Text: "say hello into a file"})},
	{"interrupt", wire.MustNew(wire.TypeInterrupt, "t_4f9c2a1b3c5d", "m2", nil)},
	{"ping", wire.MustNew(wire.TypePing, "", "p1", nil)},
	{"run_tool", wire.MustNew(wire.TypeRunTool, "t_4f9c2a1b3c5d", "r1", wire.RunTool{Name: "execute", Arguments: json.RawMessage(`{"command":"true"}`)})},
	{"terminal_open", wire.MustNew(wire.TypeTerminalOpen, "t_4f9c2a1b3c5d", "o1", wire.TerminalOpen{Cols: 120, Rows: 40, Env: map[string]string{"TERM": "xterm-256color"}})},
	{"terminal_attach", wire.MustNew(wire.TypeTerminalAttach, "t_4f9c2a1b3c5d", "a1", wire.TerminalRef{Session: "term_1"})},
	{"terminal_attached", wire.MustNew(wire.TypeTerminalAttached, "t_4f9c2a1b3c5d", "a1", wire.TerminalAttached{TerminalInfo: wire.TerminalInfo{Session: "term_1", Command: []string{"/bin/bash", "-l"}, Cols: 120, Rows: 40, Watchers: 2}, Screen: "\x1b[?1049l\x1b[H\x1b[2J\x1b[1;1H$ ls\x1b[2;1H$ \x1b[2;3H\x1b[?25h"})},
	{"terminal_detach", wire.MustNew(wire.TypeTerminalDetach, "t_4f9c2a1b3c5d", "d1", wire.TerminalRef{Session: "term_1"})},
	{"terminal_detached", wire.MustNew(wire.TypeTerminalDetached, "t_4f9c2a1b3c5d", "", wire.TerminalDetached{Session: "term_1", Reason: wire.DetachTooSlow})},
	{"terminal_resize", wire.MustNew(wire.TypeTerminalResize, "t_4f9c2a1b3c5d", "r1", wire.TerminalResize{Session: "term_1", Cols: 132, Rows: 43})},
	{"terminal_signal", wire.MustNew(wire.TypeTerminalSignal, "t_4f9c2a1b3c5d", "s1", wire.TerminalSignal{Session: "term_1", Signal: "INT"})},
	{"terminal_close", wire.MustNew(wire.TypeTerminalClose, "t_4f9c2a1b3c5d", "c1", wire.TerminalRef{Session: "term_1"})},
	{"terminal_closed", wire.MustNew(wire.TypeTerminalClosed, "t_4f9c2a1b3c5d", "c1", wire.TerminalRef{Session: "term_1"})},
	{"terminal_exit", wire.MustNew(wire.TypeTerminalExit, "t_4f9c2a1b3c5d", "", wire.TerminalExit{Session: "term_1", ExitCode: 3})},
	{"terminal_list", wire.MustNew(wire.TypeTerminalList, "t_4f9c2a1b3c5d", "l1", nil)},
	{"terminal_sessions", wire.MustNew(wire.TypeTerminalSessions, "t_4f9c2a1b3c5d", "l1", wire.TerminalSessions{Sessions: []wire.TerminalInfo{{Session: "term_1", Command: []string{"/bin/bash", "-l"}, Cols: 132, Rows: 43, Watchers: 1}, {Session: "term_2", Command: []string{"top"}, Cols: 80, Rows: 24, Exited: true, ExitCode: intp(0)}}})},
	{"sandbox_exited_oom", withSeq(wire.MustNew(wire.TypeSandboxExited, "t_4f9c2a1b3c5d", "", wire.SandboxExited{Reason: wire.ExitOOM, ExitCode: intp(137), OOMKilled: true, Message: "sandbox stopped: exit code 137, killed for running out of memory"}), 12)},
	{"sandbox_exited_idle", withSeq(wire.MustNew(wire.TypeSandboxExited, "t_4f9c2a1b3c5d", "", wire.SandboxExited{Reason: wire.ExitIdle, Message: "sandbox removed: idle for 30m0s"}), 13)},
	{"usage", withSeq(wire.MustNew(wire.TypeUsage, "t_4f9c2a1b3c5d", "", wire.UsageReport{Model: "gpt-4o-mini", Call: wire.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}, Total: wire.Usage{PromptTokens: 240, CompletionTokens: 60, TotalTokens: 300}, Requests: 2, TokenBudget: 100000}), 12)},
	{"egress_denied", withSeq(wire.MustNew(wire.TypeEgress, "t_4f9c2a1b3c5d", "", wire.EgressDecision{Method: "CONNECT", Host: "evil.example", Port: 443, Reason: "no rule allows evil.example:443"}), 13)},
	{"egress_allowed", withSeq(wire.MustNew(wire.TypeEgress, "t_4f9c2a1b3c5d", "", wire.EgressDecision{Method: "GET", Host: "pypi.org", Port: 80, Allowed: true, Rule: "pypi.org"}), 14)},
	{"history", wire.MustNew(wire.TypeHistory, "t_4f9c2a1b3c5d", "", wire.History{Events: []wire.Envelope{withSeq(wire.MustNew(wire.TypeUserEcho, "t_4f9c2a1b3c5d", "m1", wire.UserMessage{Text: "remember 42"}), 1), withSeq(wire.MustNew(wire.TypeAssistantMessage, "t_4f9c2a1b3c5d", "m1", wire.Text{Text: "I will remember 42."}), 3)}, More: true})},
	{"sandbox_replaced", withSeq(wire.MustNew(wire.TypeSandboxReplaced, "t_4f9c2a1b3c5d", "", wire.SandboxReplaced{Reason: wire.ExitOOM, SandboxID: "5e1c0ffee000", Restored: 14, Message: "sandbox replaced after it stopped (exit code 137); workspace and conversation kept"}), 16)},
	{"sandbox_exited_lifetime", withSeq(wire.MustNew(wire.TypeSandboxExited, "t_4f9c2a1b3c5d", "", wire.SandboxExited{Reason: wire.ExitLifetime, Message: "sandbox recycled: it reached its maximum lifetime of 24h0m0s"}), 17)},
	{"sandbox_replaced_image_update", withSeq(wire.MustNew(wire.TypeSandboxReplaced, "t_4f9c2a1b3c5d", "", wire.SandboxReplaced{Reason: wire.ExitImageUpdate, SandboxID: "7a2b0ffee111", Restored: 14, Message: "sandbox replaced (image boxwire:latest updated from sha256:1f2e3d4c5b6a to sha256:9a8b7c6d5e4f); workspace and conversation kept"}), 18)},
	{"sandbox_replaced_idle", withSeq(wire.MustNew(wire.TypeSandboxReplaced, "t_4f9c2a1b3c5d", "", wire.SandboxReplaced{Reason: wire.ExitIdle, SandboxID: "7a2b0ffee222", Restored: 14, Message: "suspended thread resumed in a new sandbox; workspace and conversation kept"}), 19)},
	{"error_budget", withSeq(wire.ErrorEnvelope("t_4f9c2a1b3c5d", "", wire.CodeBudgetExceeded, "thread token budget of 100000 tokens is spent (100150 used)"), 15)},
	{"tool_check", wire.MustNew(wire.TypeToolCheck, "local", "chk_1", wire.ToolCheck{CallID: "call_5", Name: "execute", Arguments: json.RawMessage(`{"command":"git push origin main"}`)})},
	{"tool_verdict_denied", wire.MustNew(wire.TypeToolVerdict, "local", "chk_1", wire.ToolVerdict{Reason: "denied by c3: not today"})},
	{"approve", wire.MustNew(wire.TypeApprove, "t_4f9c2a1b3c5d", "v1", wire.ApprovalAnswer{ApprovalID: "ap_9d1e3a7b5c2f"})},
	{"deny", wire.MustNew(wire.TypeDeny, "t_4f9c2a1b3c5d", "v2", wire.ApprovalAnswer{ApprovalID: "ap_9d1e3a7b5c2f", Reason: "not today"})},
	{"approval_request_tool", withSeq(wire.MustNew(wire.TypeApprovalRequest, "t_4f9c2a1b3c5d", "", wire.ApprovalRequest{ApprovalID: "ap_9d1e3a7b5c2f", ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: "execute", CallID: "call_5", Arguments: json.RawMessage(`{"command":"git push origin main"}`)}, Rule: "tool execute command=git push*", Expires: "2026-12-01T10:05:00Z"}), 16)},
	{"approval_request_credential", withSeq(wire.MustNew(wire.TypeApprovalRequest, "t_4f9c2a1b3c5d", "", wire.ApprovalRequest{ApprovalID: "ap_0b7c4e2d9a1f", ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalCredential, Method: "POST", Host: "git.example.com", Port: 443, URL: "https://git.example.com/org/repo.git/git-receive-pack", Credential: "git"}, Rule: "credential git", Expires: "2026-12-01T10:06:00Z"}), 18)},
	{"approval_decision", withSeq(wire.MustNew(wire.TypeApprovalDecision, "t_4f9c2a1b3c5d", "", wire.ApprovalDecision{ApprovalID: "ap_9d1e3a7b5c2f", ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: "execute", CallID: "call_5", Arguments: json.RawMessage(`{"command":"git push origin main"}`)}, Verdict: wire.VerdictApproved, By: "c3", At: "2026-12-01T10:04:12Z", Rule: "tool execute command=git push*"}), 17)},
	{"claim", wire.MustNew(wire.TypeClaim, "t_4f9c2a1b3c5d", "claim_1", wire.Claim{LLMToken: "9b1d0c7e2f4a6b8c"})},
	{"claimed", wire.MustNew(wire.TypeClaimed, "t_4f9c2a1b3c5d", "claim_1", nil)},
	{"resume", wire.MustNew(wire.TypeResume, "t_4f9c2a1b3c5d", "resume", wire.Resume{Instance: "a3f09c1d2b7e4f60", After: 1207})},
	{"resumed", wire.MustNew(wire.TypeResumed, "t_4f9c2a1b3c5d", "resume", wire.Resumed{Instance: "a3f09c1d2b7e4f60", After: 1207, Replayed: 42, Seq: 1249, Busy: true, Turn: true, Calls: []string{"call_7"}})},
	{"accepted", wire.MustNew(wire.TypeAccepted, "t_4f9c2a1b3c5d", "c3~5e1f.12/m7", nil)},
	{"events_lost", withSeq(wire.MustNew(wire.TypeEventsLost, "t_4f9c2a1b3c5d", "", wire.EventsLost{Instance: "a3f09c1d2b7e4f60", From: 1208, To: 1530, Count: 323, Message: "323 events the agent made while no bridge was attached are no longer held (its backlog keeps 8 MiB)"}), 20)},
	{"approval_decision_timeout", withSeq(wire.MustNew(wire.TypeApprovalDecision, "t_4f9c2a1b3c5d", "", wire.ApprovalDecision{ApprovalID: "ap_0b7c4e2d9a1f", ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalEgress, Method: "CONNECT", Host: "pypi.org", Port: 443}, Verdict: wire.VerdictDenied, By: wire.ByTimeout, At: "2026-12-01T10:07:00Z", Reason: "no answer within 1m0s"}), 19)},
	{"host_tools", wire.MustNew(wire.TypeHostTools, "t_4f9c2a1b3c5d", "htl_1", wire.HostTools{Tools: []wire.HostTool{{Name: "gh_search", Description: "Search the code host.", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}})},
	{"host_tools_mcp", wire.MustNew(wire.TypeHostTools, "t_4f9c2a1b3c5d", "htl_2", wire.HostTools{Tools: []wire.HostTool{},
		MCPServers: []wire.MCPServer{{Name: "docs", Prefix: "docs_", Command: []string{"/usr/local/bin/docs-mcp", "--stdio"},
			Env: map[string]string{"DOCS_INDEX": "/opt/docs"}, Dir: "/opt/docs", Tools: []string{"search", "read_*"}, Timeout: "1m"}}})},
	{"host_progress", wire.MustNew(wire.TypeHostProgress, "t_4f9c2a1b3c5d", "hc_2", wire.HostProgress{Message: "searching"})},
	{"host_result", wire.MustNew(wire.TypeHostResult, "t_4f9c2a1b3c5d", "hc_2", wire.HostResult{Output: "boxwire/boxwire token [REDACTED]", Redacted: 1})},
	{"host_result_error", wire.MustNew(wire.TypeHostResult, "t_4f9c2a1b3c5d", "hc_3", wire.HostResult{Error: "host tool server gh ended during the call (calling \"tools/call\": EOF); its standard error ended: gh-mcp: out of memory; it is started again for the next call"})},
	{"egress_rules", withSeq(wire.MustNew(wire.TypeEgressRules, "t_4f9c2a1b3c5d", "", wire.EgressRules{Rules: []string{".pythonhosted.org", "pypi.org"}, Previous: []string{"pypi.org"}, By: wire.EgressByAPI}), 21)},
}

// indent renders env as wire.Marshal does, indented for reading.
func indent(t *testing.T, env wire.Envelope) []byte {
	t.Helper()
	raw, err := wire.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func withSeq(e wire.Envelope, seq uint64) wire.Envelope { e.Seq = seq; return e }

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", g.name+".json"), indent(t, g.env))
		})
	}
}

// checkGolden compares got with the golden file at path, writing it
// first with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\n got: %s\nwant: %s", path, got, want)
	}
}

// TestGoldenFiles checks every golden file, whoever wrote it: it parses
// back to itself, its type is defined and is an event exactly when it
// carries a seq; and every type has at least one file.
func TestGoldenFiles(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	seen := map[wire.Type]bool{}
	for _, path := range paths {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		back, err := wire.Parse(want)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		seen[back.Type] = true
		if again := indent(t, back); !bytes.Equal(again, want) {
			t.Errorf("%s: round trip differs: %s", path, again)
		}
		if !wire.Known(back.Type) {
			t.Errorf("%s: type %q is not Known", path, back.Type)
		}
		if wire.IsEvent(back.Type) != (back.Seq != 0) && back.Type != wire.TypeError {
			t.Errorf("%s: type %q: IsEvent=%v but seq=%d", path, back.Type, wire.IsEvent(back.Type), back.Seq)
		}
	}
	for _, typ := range wire.Types() {
		if !seen[typ] {
			t.Errorf("no golden file for %q", typ)
		}
	}
}

func TestDecodePayload(t *testing.T) {
	t.Parallel()
	env := wire.MustNew(wire.TypeToolResult, "t", "m", wire.ToolResult{CallID: "c", ExitCode: intp(3)})
	var res wire.ToolResult
	if err := env.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 || res.CallID != "c" {
		t.Fatalf("decoded %+v", res)
	}
	if err := (wire.Envelope{Type: wire.TypeUserMessage}).Decode(&wire.UserMessage{}); err == nil {
		t.Fatal("decoding a missing payload succeeded")
	}
	bad := wire.Envelope{Type: wire.TypeUserMessage, Data: json.RawMessage(`{"text":5}`)}
	if err := bad.Decode(&wire.UserMessage{}); err == nil {
		t.Fatal("decoding a mistyped payload succeeded")
	}
}

func TestReadMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		limit   int
		wantErr func(error) bool
		want    wire.Type
	}{
		{"ok", `{"type":"ping","id":"1"}`, 100, nil, wire.TypePing},
		{"unknown type still parses", `{"type":"bogus"}`, 100, nil, "bogus"},
		{"not json", `hello`, 100, isCode(wire.CodeBadMessage), ""},
		{"no type", `{"id":"1"}`, 100, isCode(wire.CodeBadMessage), ""},
		{"array", `[1,2]`, 100, isCode(wire.CodeBadMessage), ""},
		{"exactly the limit", `{"type":"ping","id":"12345"}`, 28, nil, wire.TypePing},
		{"one over the limit", `{"type":"ping","id":"123456"}`, 28, func(err error) bool { return errors.Is(err, wire.ErrTooLarge) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReader(tt.in)
			env, err := wire.ReadMessage(r, tt.limit)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				if r.Len() != 0 {
					t.Fatalf("%d bytes left unread", r.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.Type != tt.want {
				t.Fatalf("type = %q, want %q", env.Type, tt.want)
			}
		})
	}
}

func isCode(c wire.Code) func(error) bool {
	return func(err error) bool {
		var we wire.Error
		return errors.As(err, &we) && we.Code == c
	}
}

func TestKnownAndEvents(t *testing.T) {
	t.Parallel()
	if wire.Known("bogus") || wire.IsEvent("bogus") {
		t.Fatal("an unknown type counts as known")
	}
	for _, typ := range []wire.Type{wire.TypeHello, wire.TypeUserMessage, wire.TypeInterrupt, wire.TypePing, wire.TypePong} {
		if wire.IsEvent(typ) {
			t.Errorf("%s counted as an event", typ)
		}
	}
}
