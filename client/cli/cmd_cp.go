package cli

import "context"

// runCopy is "client cp": Copy, ended early by Ctrl-C.
func runCopy(ctx context.Context, inv *invocation, args []string) int {
	ctx, cancel := untilInterrupt(ctx, inv) // cmd_forward.go
	defer cancel()
	return Copy(ctx, inv.opts, args, inv.progress)
}
