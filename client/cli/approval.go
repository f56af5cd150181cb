package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Approval modes (Options.Approvals).
const (
	// ApprovalsAsk asks the person at the terminal (or, with JSON, reads
	// a verdict line from In).
	ApprovalsAsk = ""
	// ApprovalsAutoApprove approves every request: for scripts only.
	ApprovalsAutoApprove = "auto-approve"
	// ApprovalsAutoDeny denies every request.
	ApprovalsAutoDeny = "auto-deny"
)

// answerWait bounds sending an answer.
const answerWait = 10 * time.Second

// approval answers an approval_request event (docs/approvals.md): by the
// auto mode, else by asking. Expired requests (replayed from the log) are
// skipped. It blocks while it asks.
func (s *session) approval(env wire.Envelope) {
	if env.Type == wire.TypeApprovalDecision {
		var d wire.ApprovalDecision
		if env.Decode(&d) == nil {
			s.asked = slices.DeleteFunc(s.asked, func(id string) bool { return id == d.ApprovalID })
		}
		return
	}
	if env.Type != wire.TypeApprovalRequest {
		return
	}
	var req wire.ApprovalRequest
	if env.Decode(&req) != nil {
		return
	}
	if !slices.Contains(s.asked, req.ApprovalID) {
		// open until its approval_decision, even when it looks expired
		// here: the bridge's clock decides.
		s.asked = append(s.asked, req.ApprovalID)
	}
	if exp, err := time.Parse(time.RFC3339, req.Expires); err == nil && time.Now().After(exp) {
		return
	}
	approve, reason := false, ""
	switch s.o.Approvals {
	case ApprovalsAutoApprove:
		approve = true
	case ApprovalsAutoDeny:
		reason = "denied by --auto-deny"
	case ApprovalsAsk:
		if s.o.Message == "" && !s.o.JSON {
			s.askInteractive(req) // the chat's own lines answer
			return
		}
		if !s.o.JSON {
			fmt.Fprintf(s.o.Err, "\nboxwire: approval needed: %s\napprove? [y/N] ", describeAction(req))
		}
		approve = s.readVerdict(req.ApprovalID)
		if !approve {
			reason = "denied by the user"
		}
	}
	s.answer(req.ApprovalID, approve, reason)
}

// answer sends approve or deny for the approval request id.
func (s *session) answer(id string, approve bool, reason string) {
	typ := wire.TypeDeny
	if approve {
		typ, reason = wire.TypeApprove, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWait)
	defer cancel()
	if err := s.current().Send(ctx, wire.MustNew(typ, s.current().Thread(), "ap-"+id,
		wire.ApprovalAnswer{ApprovalID: id, Reason: reason})); err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: answer approval: %v\n", err)
	}
}

// readVerdict reads one line from In: "y"/"yes"/"approve" approves; with
// JSON, {"approval_id": ..., "verdict": "approve"} too. Anything else, or
// no input, denies.
func (s *session) readVerdict(id string) bool {
	if s.o.In == nil {
		return false
	}
	if s.approvalIn == nil {
		s.approvalIn = bufio.NewReader(s.o.In)
	}
	line, _ := s.approvalIn.ReadString('\n')
	line = strings.TrimSpace(line)
	var v struct {
		ApprovalID string `json:"approval_id"`
		Verdict    string `json:"verdict"`
	}
	if json.Unmarshal([]byte(line), &v) == nil {
		return (v.ApprovalID == "" || v.ApprovalID == id) && (v.Verdict == "approve" || v.Verdict == "approved")
	}
	switch strings.ToLower(line) {
	case "y", "yes", "approve":
		return true
	}
	return false
}

// describeAction is one line saying exactly what would happen.
func describeAction(r wire.ApprovalRequest) string {
	var what string
	switch r.Kind {
	case wire.ApprovalTool:
		what = fmt.Sprintf("run %s %s", r.Tool, r.Arguments)
	case wire.ApprovalCredential:
		what = fmt.Sprintf("send credential %q with %s %s", r.Credential, r.Method, r.URL)
	default:
		what = fmt.Sprintf("connect to %s:%d (%s %s)", r.Host, r.Port, r.Method, r.URL)
	}
	if r.Rule != "" {
		what += " [rule: " + r.Rule + "]"
	}
	if r.Reason != "" {
		what += " — " + r.Reason
	}
	return what + " (expires " + r.Expires + ")"
}

// askInteractive shows req in the interactive chat and takes the next
// line typed as the answer: y, yes, approve or /approve approves;
// /deny [REASON] denies with that reason; /approve ID and /deny ID
// [REASON] answer request ID (when ID is another request, that one is
// answered and req is asked again); any other line denies. With no line
// before the request expires it stays open (/approve and /deny still
// answer it until the bridge denies it). It blocks until a line answers
// req or the request expires.
func (s *session) askInteractive(req wire.ApprovalRequest) {
	s.r.EndLine()
	s.r.Printf("approval needed [%s]: %s", req.ApprovalID, describeAction(req))
	s.r.Printf("approve? [y/N] (or later: /approve %s, /deny %s)", req.ApprovalID, req.ApprovalID)
	if s.lines == nil {
		return
	}
	wait := time.Minute
	if exp, err := time.Parse(time.RFC3339, req.Expires); err == nil {
		wait = time.Until(exp)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		_ = s.ask()
		select {
		case line, ok := <-s.lines:
			if !ok {
				return
			}
			s.r.LineEntered()
			if s.answerLine(req.ApprovalID, line) {
				return
			}
			s.r.Printf("approve %s? [y/N]", req.ApprovalID)
		case <-timer.C:
			s.r.Printf("approval %s expired unanswered (denied)", req.ApprovalID)
			return
		}
	}
}

// answerLine answers with one line typed at request id's prompt and
// reports whether it answered id (false: it answered another request).
func (s *session) answerLine(id, line string) bool {
	fields := strings.Fields(line)
	if len(fields) > 0 && (fields[0] == "/approve" || fields[0] == "/deny") {
		return s.answerCommand(fields[0], fields[1:], id) == id
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes", "approve":
		s.answer(id, true, "")
	default:
		s.answer(id, false, "denied by the user")
	}
	return true
}

// answerCommand runs /approve [ID] or /deny [ID] [REASON]; without an ID
// it answers def, or the newest open request when def is empty. /approve
// takes its argument as the ID whatever it looks like (a mistyped ID must
// not approve another request); /deny takes its first argument as the ID
// when it starts with "ap_", else as the first word of the reason. An ID
// that is not open (a typo, or already decided) is not sent: the error
// names the open ones. It returns the id answered ("" for none).
func (s *session) answerCommand(cmd string, args []string, def string) string {
	id := ""
	switch {
	case cmd == "/approve" && len(args) > 1:
		s.r.Printf("usage: /approve [ID]")
		return ""
	case len(args) > 0 && (cmd == "/approve" || strings.HasPrefix(args[0], "ap_")):
		id, args = args[0], args[1:]
	case def != "":
		id = def
	case len(s.asked) > 0:
		id = s.asked[len(s.asked)-1]
	}
	if id == "" {
		s.r.Printf("no open approval request (usage: %s [ID])", cmd)
		return ""
	}
	if !slices.Contains(s.asked, id) {
		s.r.Printf("%s", s.notPending(id))
		return ""
	}
	reason := strings.Join(args, " ")
	if cmd == "/deny" && reason == "" {
		reason = "denied by the user"
	}
	s.answer(id, cmd == "/approve", reason)
	s.r.Printf("%s sent for %s", strings.TrimPrefix(cmd, "/"), id)
	return id
}

// notPending is the error for an approval id that is not open: it names
// the open ones.
func (s *session) notPending(id string) string {
	open := "none pending"
	if len(s.asked) > 0 {
		open = "pending: " + strings.Join(s.asked, ", ")
	}
	return fmt.Sprintf("✗ no pending approval %q (%s)", id, open)
}
