package render

import (
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// egressRules shows a change of the sandbox's egress rules on one bold
// line: the rules now (or that there are none) and the ones they replaced.
func (r *Renderer) egressRules(env wire.Envelope) {
	var e wire.EgressRules
	if !r.decode(env, &e) {
		return
	}
	by := e.By
	if by == "" {
		by = "unknown"
	}
	line := "⇄ egress rules removed by " + by
	if len(e.Rules) > 0 {
		line = "⇄ egress rules set by " + by + ": " + strings.Join(e.Rules, " ")
	}
	if len(e.Previous) > 0 {
		line += " (were: " + strings.Join(e.Previous, " ") + ")"
	}
	r.EndLine()
	r.styled(styleBold, line)
	r.write("\n")
}
