package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// egressUsage is the /egress usage line.
const egressUsage = "usage: /egress [RULE...] or /egress --clear"

// egressCommand runs /egress through the bridge's threads API: with no
// args it prints the thread's own egress rules, with RULE... it replaces
// them, with --clear it removes them. A refusal is printed with the
// bridge's code and reason. It blocks until the bridge answers.
func (s *session) egressCommand(ctx context.Context, args []string) {
	c := s.current()
	if c.Server().Role == wire.RoleAgent {
		s.r.Printf("/egress needs a bridge: egress rules belong to the bridge's sandboxes")
		return
	}
	var info wire.ThreadInfo
	var err error
	switch {
	case len(args) == 0:
		info, err = chat.GetThread(ctx, s.o.Chat, c.Thread())
	case len(args) == 1 && args[0] == "--clear":
		info, err = chat.SetEgress(ctx, s.o.Chat, c.Thread(), nil)
	case slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") }):
		s.r.Printf("%s", egressUsage)
		return
	default:
		info, err = chat.SetEgress(ctx, s.o.Chat, c.Thread(), args)
	}
	var werr wire.Error
	switch {
	case errors.As(err, &werr):
		s.r.EndLine()
		fmt.Fprintf(s.o.Err, "boxwire: egress: the bridge refused (%s): %s\n", werr.Code, werr.Message)
	case err != nil:
		s.r.EndLine()
		fmt.Fprintf(s.o.Err, "boxwire: %v\n", err)
	case len(info.Egress) == 0:
		s.r.Printf("egress rules of %s: none (the bridge's allowlist only)", info.ID)
	default:
		s.r.Printf("egress rules of %s: %s", info.ID, strings.Join(info.Egress, " "))
	}
}
