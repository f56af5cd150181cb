package wire

import "encoding/json"

// Host tools (docs/tools.md, "Host tools"): tools the operator runs on the
// host, outside every sandbox, as MCP servers the bridge talks to. The
// agent asks its bridge which host tools its thread may use, offers them
// to the model beside its own, and sends each call to the bridge, which
// calls the MCP server and answers with the result. Every message here is
// between an agent and its bridge: the bridge refuses them from clients,
// and the agent from any connection that is not its bridge.
const (
	// TypeHostToolsList is sent by the agent to its bridge at the start of
	// each turn (no payload); the bridge answers TypeHostTools with the
	// same id.
	TypeHostToolsList Type = "host_tools_list"
	// TypeHostTools answers TypeHostToolsList (payload HostTools): the
	// host tools the thread may use now.
	TypeHostTools Type = "host_tools"
	// TypeHostCall is sent by the agent to run one host tool (payload
	// HostCall); the bridge answers TypeHostResult with the same id, after
	// zero or more TypeHostProgress.
	TypeHostCall Type = "host_call"
	// TypeHostProgress carries a progress message of a running host call
	// (payload HostProgress), with the call's id; the agent streams it as
	// the call's tool_output.
	TypeHostProgress Type = "host_progress"
	// TypeHostResult ends a host call (payload HostResult).
	TypeHostResult Type = "host_result"
	// TypeHostCancel is sent by the agent, with a running call's id, when
	// the turn is interrupted (no payload, no answer): the bridge cancels
	// the call on the MCP server (notifications/cancelled).
	TypeHostCancel Type = "host_cancel"
)

func init() {
	registerRequests(TypeHostToolsList, TypeHostTools, TypeHostCall, TypeHostProgress, TypeHostResult, TypeHostCancel)
}

// IsHostTool reports whether typ is one of the host tool messages, which
// travel only between an agent and its bridge.
func IsHostTool(typ Type) bool {
	switch typ {
	case TypeHostToolsList, TypeHostTools, TypeHostCall, TypeHostProgress, TypeHostResult, TypeHostCancel:
		return true
	}
	return false
}

// HostTools is the payload of TypeHostTools.
type HostTools struct {
	// Tools are the host tools the thread may use, sorted by name.
	Tools []HostTool `json:"tools"`
	// Errors says which configured servers could not be reached, for the
	// agent's log (their tools are missing from Tools).
	Errors []string `json:"errors,omitempty"`
	// MCPServers are the MCP servers the thread declares
	// (CreateThread.MCP), checked by the bridge: the agent runs them in
	// the sandbox beside the image's and offers their tools too.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
}

// HostTool is one host tool as the model sees it: the MCP tool's name
// (with its server's prefix, if the operator set one), description and
// input schema.
type HostTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// HostCall is the payload of TypeHostCall.
type HostCall struct {
	// CallID is the model's tool-call id (as in its tool_call event).
	CallID string `json:"call_id"`
	// Name is the host tool, as HostTool.Name.
	Name string `json:"name"`
	// Arguments is the JSON object the model produced.
	Arguments json.RawMessage `json:"arguments"`
}

// HostProgress is the payload of TypeHostProgress.
type HostProgress struct {
	// Message is the server's progress message, redacted.
	Message string `json:"message"`
}

// HostResult is the payload of TypeHostResult.
type HostResult struct {
	// Output is the tool's text content (structured content as JSON when
	// it sent no text), redacted of the secrets the bridge knows.
	Output string `json:"output,omitempty"`
	// Error says the call failed and why: the tool reported an error
	// (Output then holds its words), the server could not be reached or
	// ended, the name is not allowed for the thread, or it was cancelled.
	Error string `json:"error,omitempty"`
	// Redacted counts the secrets masked in Output and Error.
	Redacted int `json:"redacted,omitempty"`
}
