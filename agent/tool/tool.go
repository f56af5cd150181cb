package tool

import (
	"context"
	"encoding/json"
)

// Tool is one capability the model can call. Implementations are safe for
// concurrent use; Run blocks until the tool is done or ctx ends.
type Tool interface {
	// Name is the function name the model uses, e.g. "execute".
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Parameters is the JSON Schema of the arguments object.
	Parameters() json.RawMessage
	// Run performs one call. A failure is reported in Result.Err (it is the
	// model's result, not a Go error). When ctx ends, Run stops the work it
	// started (killing processes) before it returns.
	Run(ctx context.Context, call Call) Result
}

// Call is one invocation of a tool.
type Call struct {
	// ID is the model's tool-call id.
	ID string
	// Args is the JSON object the model produced.
	Args json.RawMessage
	// Output, when not nil, receives output chunks while the tool runs, in
	// order, from one goroutine at a time. It must not retain the slice.
	Output func(chunk []byte)
}

// Result is what a call produced.
type Result struct {
	// Output is the text the model sees, already capped.
	Output string
	// ExitCode is the process exit status (execute, once the command
	// ended).
	ExitCode *int
	// Status says how a command ended or why it is still running: one of
	// the wire.Status constants; empty for file tools.
	Status string
	// JobID names the background job a command became (status background
	// or awaiting_input).
	JobID string
	// Truncated says Output was cut. TotalBytes and TotalLines are the
	// sizes of the whole output (execute sets them always), and OutputPath
	// is a file holding it, which read_file can page through.
	Truncated  bool
	TotalBytes int64
	TotalLines int64
	OutputPath string
	// Cwd is, for execute in the remembered shell (not fresh), the
	// directory the command ended in or, when it did not end by itself,
	// the one the thread's next command starts in.
	Cwd string
	// Err, when set, says the call failed and why, for the model to read.
	Err string
}
