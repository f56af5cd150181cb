package wire

import "encoding/json"

// Approval message types (docs/approvals.md).
const (
	// TypeToolCheck is sent by the agent to its bridge before it runs each
	// tool call (payload ToolCheck); the bridge answers TypeToolVerdict
	// with the same ID. It is the cooperative safeguard: only an agent
	// that asks is checked. Clients may not send it.
	TypeToolCheck Type = "tool_check"
	// TypeToolVerdict answers TypeToolCheck (payload ToolVerdict). Only
	// the bridge sends it; the bridge refuses it from clients.
	TypeToolVerdict Type = "tool_verdict"
	// TypeApprove and TypeDeny are a client's answer to an
	// approval_request (payload ApprovalAnswer). The first answer for an
	// approval id wins; later ones get an error of code CodeNotFound.
	TypeApprove Type = "approve"
	TypeDeny    Type = "deny"

	// TypeApprovalRequest is an event: the bridge holds an action until a
	// person approves it (payload ApprovalRequest). It is logged, so a
	// client that attaches later sees pending requests.
	TypeApprovalRequest Type = "approval_request"
	// TypeApprovalDecision is an event recording every decision about a
	// checked action: a person's answer, a timeout, or a policy rule
	// (payload ApprovalDecision). It is the audit trail.
	TypeApprovalDecision Type = "approval_decision"
)

func init() {
	registerRequests(TypeToolCheck, TypeToolVerdict, TypeApprove, TypeDeny)
	registerEvents(TypeApprovalRequest, TypeApprovalDecision)
}

// Kinds of checked action in ApprovalRequest.Kind and ApprovalDecision.Kind.
const (
	// ApprovalTool is a tool call the agent asked about (cooperative).
	ApprovalTool = "tool"
	// ApprovalEgress is a connection the egress proxy holds (enforced).
	ApprovalEgress = "egress"
	// ApprovalCredential is a request to which the egress proxy would add
	// a host-held credential (enforced).
	ApprovalCredential = "credential"
)

// Verdicts in ApprovalDecision.Verdict.
const (
	VerdictApproved = "approved"
	VerdictDenied   = "denied"
)

// Who decided, in ApprovalDecision.By, besides a client connection id.
const (
	ByPolicy  = "policy"
	ByTimeout = "timeout"
	// ByShutdown: the thread or bridge closed while the request waited.
	ByShutdown = "shutdown"
)

// ToolCheck is the payload of TypeToolCheck.
type ToolCheck struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Arguments is the JSON object the tool will run with.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolVerdict is the payload of TypeToolVerdict.
type ToolVerdict struct {
	Allowed bool `json:"allowed"`
	// Reason says why (shown to the model when refused).
	Reason string `json:"reason,omitempty"`
}

// ApprovalAction is the exact action a request or decision is about.
// Fields not relevant to its kind are empty.
type ApprovalAction struct {
	// Kind is ApprovalTool, ApprovalEgress or ApprovalCredential.
	Kind string `json:"kind"`
	// Tool, CallID and Arguments describe a tool call.
	Tool      string          `json:"tool,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Method, Host, Port and URL describe an egress request (URL only
	// when the proxy sees the request: plain HTTP, or HTTPS it
	// terminates for a credential).
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"`
	Port   int    `json:"port,omitempty"`
	URL    string `json:"url,omitempty"`
	// Credential names the host-held credential the request would use.
	Credential string `json:"credential,omitempty"`
}

// ApprovalRequest is the payload of TypeApprovalRequest.
type ApprovalRequest struct {
	// ApprovalID names this one request; answers carry it.
	ApprovalID string `json:"approval_id"`
	ApprovalAction
	// Rule is the policy rule that asked; Reason its explanation.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Expires is when the request is denied unanswered (RFC 3339).
	Expires string `json:"expires"`
}

// ApprovalDecision is the payload of TypeApprovalDecision.
type ApprovalDecision struct {
	// ApprovalID is set when the decision answers an approval_request.
	ApprovalID string `json:"approval_id,omitempty"`
	ApprovalAction
	// Verdict is VerdictApproved or VerdictDenied.
	Verdict string `json:"verdict"`
	// By is the deciding client connection's id, or ByPolicy, ByTimeout
	// or ByShutdown.
	By string `json:"by"`
	// At is when it was decided (RFC 3339, UTC).
	At string `json:"at"`
	// Rule is the policy rule that applied; Reason the decider's words.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ApprovalAnswer is the payload of TypeApprove and TypeDeny.
type ApprovalAnswer struct {
	ApprovalID string `json:"approval_id"`
	// Reason is optional; a denial's reason is shown to the model.
	Reason string `json:"reason,omitempty"`
}

// IsApproval reports whether typ is an approval event: they carry no
// request id, so a client waiting for its turn's events must still take
// them.
func IsApproval(typ Type) bool {
	return typ == TypeApprovalRequest || typ == TypeApprovalDecision
}
