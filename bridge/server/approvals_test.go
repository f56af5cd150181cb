package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The fake agent's approval scenarios (approvalAnswer, hooked into
// fakeAgent.answer):
//
//	"check TOOL ARGS"  sends tool_check for TOOL with ARGS (JSON) and, when
//	                   the verdict comes, says "allowed" or "refused: REASON"
//	"leak"             streams tool output with secrets split over chunks
const (
	checkPrefix = "chk:"
	// leakKey is split over two tool_output chunks; neither half alone
	// has the shape of a key.
	leakKeyA, leakKeyB = "sk-abcdefghijkl", "mnopqrstuvwx"
	planted            = "planted-secret-value"
)

func (a *fakeAgent) approvalAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	switch env.Type {
	case wire.TypeUserMessage:
		var m wire.UserMessage
		if env.Decode(&m) != nil {
			return nil, false
		}
		if !strings.HasPrefix(m.Text, "check ") && m.Text != "leak" {
			return nil, false // before taking a seq: the common answer numbers it
		}
		out := []wire.Envelope{a.event(wire.TypeUserEcho, env.ID, m)}
		if rest, ok := strings.CutPrefix(m.Text, "check "); ok {
			name, args, _ := strings.Cut(rest, " ")
			// The check's id must hold no "/": the bridge routes replies by it.
			chk := wire.MustNew(wire.TypeToolCheck, "", checkPrefix+strings.ReplaceAll(env.ID, "/", "|"),
				wire.ToolCheck{CallID: "call1", Name: name, Arguments: json.RawMessage(args)})
			return append(out, chk), true
		}
		if m.Text == "leak" {
			return append(out,
				a.event(wire.TypeToolOutput, env.ID, wire.ToolOutput{CallID: "call1", Output: "key " + leakKeyA}),
				a.event(wire.TypeToolOutput, env.ID, wire.ToolOutput{CallID: "call1", Output: leakKeyB + " done\n" + planted + "\nlast words"}),
				a.event(wire.TypeToolResult, env.ID, wire.ToolResult{CallID: "call1", Name: "execute",
					Output: "key " + leakKeyA + leakKeyB + " done\n" + planted + "\nlast words"}),
				a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop})), true
		}
		return nil, false
	case wire.TypeToolVerdict:
		rest, ok := strings.CutPrefix(env.ID, checkPrefix)
		if !ok {
			return nil, false
		}
		id := strings.ReplaceAll(rest, "|", "/")
		var v wire.ToolVerdict
		_ = env.Decode(&v)
		text := "allowed"
		if !v.Allowed {
			text = "refused: " + v.Reason
		}
		return []wire.Envelope{
			a.event(wire.TypeAssistantMessage, id, wire.Text{Text: text}),
			a.event(wire.TypeTurnDone, id, wire.TurnDone{Reason: wire.ReasonStop}),
		}, true
	}
	return nil, false
}

// newPolicyEnv is newEnv with the approval policy polJSON.
func newPolicyEnv(t *testing.T, polJSON string) *env {
	t.Helper()
	pol, err := policy.Parse([]byte(polJSON), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, func(c *server.Config) { c.Policy = pol })
}

// readUntil reads events until one of type typ and returns it.
func (s *session) readUntil(typ wire.Type) wire.Envelope {
	s.t.Helper()
	for {
		if env := s.read(); env.Type == typ {
			return env
		}
	}
}

// finalText is the text of the last assistant_message in events.
func finalText(t *testing.T, events []wire.Envelope) string {
	t.Helper()
	text := ""
	for _, env := range events {
		if env.Type == wire.TypeAssistantMessage {
			var m wire.Text
			if err := env.Decode(&m); err != nil {
				t.Fatal(err)
			}
			text = m.Text
		}
	}
	return text
}

const askPolicy = `{"rules": [
  {"tool": "execute", "args": {"command": "git push*"}, "action": "ask"},
  {"tool": "delete_file", "action": "deny", "reason": "never"}
], "approval_timeout": "1h"}`

func TestApprovalFirstAnswerWins(t *testing.T) {
	e := newPolicyEnv(t, askPolicy)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	a.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: `check execute {"command":"git push origin"}`})
	var req wire.ApprovalRequest
	if err := a.readUntil(wire.TypeApprovalRequest).Decode(&req); err != nil {
		t.Fatal(err)
	}
	if req.Kind != wire.ApprovalTool || req.Tool != "execute" || req.CallID != "call1" || !strings.Contains(string(req.Arguments), "git push") {
		t.Fatalf("approval request %+v", req)
	}
	b.readUntil(wire.TypeApprovalRequest) // every client is asked
	b.request(wire.TypeDeny, "d1", wire.ApprovalAnswer{ApprovalID: req.ApprovalID, Reason: "not today"})
	dec := b.readUntil(wire.TypeApprovalDecision)
	var d wire.ApprovalDecision
	if err := dec.Decode(&d); err != nil || d.Verdict != wire.VerdictDenied || d.By == "" || d.ApprovalID != req.ApprovalID || d.Reason != "not today" {
		t.Fatalf("decision %+v (%v)", d, err)
	}
	// The late answer is not taken.
	a.request(wire.TypeApprove, "a1", wire.ApprovalAnswer{ApprovalID: req.ApprovalID})
	var events []wire.Envelope
	for {
		env := a.read()
		if env.Type == wire.TypeError && env.ID == "a1" {
			var werr wire.Error
			if err := env.Decode(&werr); err != nil || werr.Code != wire.CodeNotFound {
				t.Fatalf("late approve: %s %s", env.Type, env.Data)
			}
			break
		}
		events = append(events, env)
	}
	if !strings.Contains(summary(events), "turn_done") {
		events = append(events, a.readTurn()...)
	}
	if text := finalText(t, events); !strings.Contains(text, "refused: denied by ") || !strings.Contains(text, "not today") {
		t.Fatalf("agent was told %q", text)
	}
}

func TestApprovalVerdicts(t *testing.T) {
	tests := []struct {
		name, policy, text, want string
		answer                   wire.Type // sent to the approval_request; "" means none comes
	}{
		{"approved", askPolicy, `check execute {"command":"git push"}`, "allowed", wire.TypeApprove},
		{"timeout denies", `{"rules":[{"tool":"*","action":"ask"}],"approval_timeout":"50ms"}`,
			`check execute {"command":"ls"}`, "refused: denied by timeout", ""},
		{"rule denies", askPolicy, `check delete_file {"path":"x"}`, "refused: denied by policy rule tool delete_file: never", ""},
		{"unmatched allowed", askPolicy, `check execute {"command":"ls"}`, "allowed", ""},
		{"tool_default deny", `{"tool_default":"deny"}`, `check read_file {}`, "refused: denied by policy", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newPolicyEnv(t, tc.policy)
			s, _ := e.attach("", 0)
			s.request(wire.TypeUserMessage, "m1", wire.UserMessage{Text: tc.text})
			var events []wire.Envelope
			for {
				env := s.read()
				events = append(events, env)
				if env.Type == wire.TypeApprovalRequest && tc.answer != "" {
					var req wire.ApprovalRequest
					_ = env.Decode(&req)
					s.request(tc.answer, "ans", wire.ApprovalAnswer{ApprovalID: req.ApprovalID})
				}
				if env.Type == wire.TypeTurnDone {
					break
				}
			}
			if text := finalText(t, events); !strings.HasPrefix(text, tc.want) {
				t.Fatalf("agent was told %q, want %q; events %s", text, tc.want, summary(events))
			}
		})
	}
}

func TestClientMayNotSendAgentApprovalTypes(t *testing.T) {
	e := newPolicyEnv(t, askPolicy)
	s, _ := e.attach("", 0)
	for _, env := range []wire.Envelope{
		wire.MustNew(wire.TypeToolCheck, "", "x1", wire.ToolCheck{CallID: "c", Name: "execute", Arguments: json.RawMessage(`{}`)}),
		wire.MustNew(wire.TypeToolVerdict, "", "x2", wire.ToolVerdict{Allowed: true}),
		wire.MustNew(wire.TypeApprove, "", "x3", wire.ApprovalAnswer{}),
	} {
		s.send(env)
		if werr := s.readError(wire.CodeBadMessage); werr.Message == "" {
			t.Fatalf("%s: empty error", env.Type)
		}
	}
	s.request(wire.TypeApprove, "x4", wire.ApprovalAnswer{ApprovalID: "ap_unknown"})
	s.readError(wire.CodeNotFound)
}

func TestRedactionAcrossChunks(t *testing.T) {
	e := newPolicyEnv(t, `{"redact": ["`+planted+`"]}`)
	s, _ := e.attach("", 0)
	events := s.turn("m1", "leak")
	var stream strings.Builder
	var result string
	for _, env := range events {
		switch env.Type {
		case wire.TypeToolOutput:
			var o wire.ToolOutput
			_ = env.Decode(&o)
			stream.WriteString(o.Output)
		case wire.TypeToolResult:
			if stream.Len() == 0 || !strings.HasSuffix(stream.String(), "last words") {
				t.Errorf("tool_result came before the whole stream: %q", stream.String())
			}
			var r wire.ToolResult
			_ = env.Decode(&r)
			result = r.Output
		}
	}
	want := "key " + policy.Mask + " done\n" + policy.Mask + "\nlast words"
	if stream.String() != want {
		t.Errorf("streamed output %q, want %q", stream.String(), want)
	}
	if result != want {
		t.Errorf("result output %q, want %q", result, want)
	}
	// The log a later client replays is masked too.
	c, _ := e.attach(s.threadID(t, events), 0)
	for _, env := range c.readTurn() {
		for _, leak := range []string{leakKeyA, leakKeyB, planted} {
			if strings.Contains(string(env.Data), leak) {
				t.Errorf("replayed %s holds %q", env.Type, leak)
			}
		}
	}
}

// threadID is the thread of events.
func (s *session) threadID(t *testing.T, events []wire.Envelope) string {
	t.Helper()
	if len(events) == 0 || events[0].Thread == "" {
		t.Fatal("no thread in events")
	}
	return events[0].Thread
}
