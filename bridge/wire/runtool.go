package wire

import "encoding/json"

// TypeRunTool is a request to run one tool directly, outside the model's
// conversation (payload RunTool): a person's "!ls" in the client, or a
// benchmark's round trip. The agent answers with the same events a model's
// call produces — tool_call, tool_output…, tool_result — carrying the
// request's id, and no turn_done. It may run while a turn runs; interrupt
// stops it too.
const TypeRunTool Type = "run_tool"

func init() { registerRequests(TypeRunTool) }

// RunTool is the payload of TypeRunTool.
type RunTool struct {
	// Name is the tool, e.g. "execute".
	Name string `json:"name"`
	// Arguments is the tool's JSON arguments object.
	Arguments json.RawMessage `json:"arguments"`
}
