package tools

import "context"

// MaxBlockingCalls is how many file tool calls (read_file, write_file,
// edit_file, delete, ls, glob, grep) run at once; more wait their turn.
// File system calls block an OS thread each, threads count against the
// sandbox's pids limit, and the agent starts a fixed reserve of them while
// it can (agent/threads): the gate keeps the file tools within it.
const MaxBlockingCalls = 8

// gate is a counting semaphore shared by the gated tools of a Set.
type gate chan struct{}

// gated is a tool whose calls pass the gate.
type gated struct {
	Tool
	gate gate
}

// Run waits for a place at the gate (or for ctx to end), then runs the
// tool.
func (g gated) Run(ctx context.Context, call Call) Result {
	select {
	case g.gate <- struct{}{}:
	case <-ctx.Done():
		return Result{Err: "stopped while waiting for other file operations: " + context.Cause(ctx).Error()}
	}
	defer func() { <-g.gate }()
	return g.Tool.Run(ctx, call)
}
