package cli

import (
	"context"

	"github.com/boxwire/boxwire/client/term"
)

// runShell is "client shell": a terminal in the sandbox (client/term).
func runShell(ctx context.Context, inv *invocation, args []string) int {
	return term.Main(ctx, inv.termOptions(), args)
}
