package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
	if env.Type != wire.TypeApprovalRequest {
		return
	}
	var req wire.ApprovalRequest
	if env.Decode(&req) != nil {
		return
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
			// The interactive chat reads In itself: do not compete for lines.
			fmt.Fprintf(s.o.Err, "\nboxwire: approval needed: %s\n(answering in the interactive chat is not supported yet; it is denied when it expires)\n", describeAction(req))
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
	typ := wire.TypeDeny
	if approve {
		typ, reason = wire.TypeApprove, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWait)
	defer cancel()
	if err := s.current().Send(ctx, wire.MustNew(typ, s.current().Thread(), "ap-"+req.ApprovalID,
		wire.ApprovalAnswer{ApprovalID: req.ApprovalID, Reason: reason})); err != nil {
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
