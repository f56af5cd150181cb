package cli

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/client/chat"
)

// runWhoAmI is "client whoami": who the bridge says the credentials are,
// with the user's sandboxes and their limit.
func runWhoAmI(ctx context.Context, inv *invocation, _ []string) int {
	id, err := chat.WhoAmI(ctx, inv.chat)
	out := inv.p.Stdout
	if err != nil {
		fmt.Fprintln(inv.p.Stderr, "boxwire:", err)
		return ExitUsage
	}
	fmt.Fprintf(out, "%s (admin: %v, via %s", id.User, id.Admin, id.Via)
	if id.KeyID != "" {
		fmt.Fprintf(out, ", key %s", id.KeyID)
	}
	fmt.Fprintf(out, "); sandboxes %d", id.Usage.Sandboxes)
	if id.Limits.Sandboxes > 0 {
		fmt.Fprintf(out, " of %d", id.Limits.Sandboxes)
	}
	fmt.Fprintln(out)
	return ExitOK
}
