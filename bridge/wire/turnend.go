package wire

// The bridge ends a turn or a tool call itself when the agent that ran it
// went away and nothing can continue it: the sandbox stopped (killed,
// crashed, out of memory, recycled), or the agent process behind a link
// restarted and no longer runs it. It publishes the missing tool_result of
// each call the log shows running, then the turn's turn_done, each once;
// an answer the old agent sends later for a call or turn the bridge
// ended is dropped. See docs/lifecycle.md, "A turn always ends".
const (
	// ReasonSandboxLost is the TurnDone.Reason of a turn the bridge ended
	// because its agent went away (the sandbox_exited before it says why).
	ReasonSandboxLost = "sandbox_lost"
	// StatusSandboxLost is the ToolResult.Status of a call the bridge
	// ended for the same reason; ToolResult.Error says what happened.
	StatusSandboxLost = "sandbox_lost"
)
