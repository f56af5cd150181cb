package tools

import (
	"context"

	"github.com/boxwire/boxwire/agent/execute"
	"github.com/boxwire/boxwire/agent/tool"
)

// Tool is one capability the model can call (tool.Tool, named here so the
// Set's callers need one import).
type Tool = tool.Tool

// Call is one invocation of a tool (tool.Call).
type Call = tool.Call

// Result is what a call produced (tool.Result).
type Result = tool.Result

// WithThread returns ctx marked as carrying calls of the named thread:
// execute keeps one remembered shell state per thread (execute.WithThread).
func WithThread(ctx context.Context, thread string) context.Context {
	return execute.WithThread(ctx, thread)
}
