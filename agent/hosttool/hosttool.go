package hosttool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultOutputLimit is how many bytes of a result the model sees when
// Tools gets no limit (the other tools' default output limit).
const DefaultOutputLimit = 30 << 10

// Caller runs one host call through the bridge. Call blocks until the
// bridge answers, the connection ends (an error) or ctx ends — then it
// tells the bridge to cancel the call and returns. progress gets the
// server's progress messages, one at a time.
type Caller interface {
	Call(ctx context.Context, call wire.HostCall, progress func(msg string)) (wire.HostResult, error)
}

// Tools returns a tool for each host tool in defs, calling through c; the
// model sees at most limit bytes of a result (0: DefaultOutputLimit).
func Tools(defs []wire.HostTool, c Caller, limit int) []tool.Tool {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	out := make([]tool.Tool, 0, len(defs))
	for _, d := range defs {
		if d.Name == "" {
			continue
		}
		out = append(out, &hostTool{def: d, c: c, limit: limit})
	}
	return out
}

// hostTool is one host tool.
type hostTool struct {
	def   wire.HostTool
	c     Caller
	limit int
}

func (t *hostTool) Name() string        { return t.def.Name }
func (t *hostTool) Description() string { return t.def.Description }

// Parameters is the tool's input schema; one that is not a JSON object
// becomes the empty object schema.
func (t *hostTool) Parameters() json.RawMessage {
	var probe map[string]any
	if json.Unmarshal(t.def.InputSchema, &probe) != nil || probe == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return t.def.InputSchema
}

// Run sends the call to the bridge and returns the tool's result; the
// server's progress messages stream as the call's output.
func (t *hostTool) Run(ctx context.Context, call tool.Call) tool.Result {
	progress := func(msg string) {
		if call.Output != nil {
			call.Output([]byte(msg + "\r\n"))
		}
	}
	res, err := t.c.Call(ctx, wire.HostCall{CallID: call.ID, Name: t.def.Name, Arguments: call.Args}, progress)
	if err != nil {
		return tool.Failed("host tool %s: %v", t.def.Name, err)
	}
	out := tool.Result{Output: res.Output, Err: res.Error}
	if len(out.Output) > t.limit {
		out.TotalBytes = int64(len(out.Output))
		out.Output = string(tool.TrimPartialRune([]byte(out.Output[:t.limit]))) +
			fmt.Sprintf("\n[host tool output cut at %d of %d bytes]", t.limit, out.TotalBytes)
		out.Truncated = true
	}
	if res.Redacted > 0 {
		out.Output += fmt.Sprintf("\n[boxwire: %d secret(s) in this result were replaced by [REDACTED]]", res.Redacted)
	}
	return out
}
