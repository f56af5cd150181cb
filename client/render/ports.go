package render

import (
	"fmt"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// ports shows what listens in the sandbox after it changed (the ports
// event), with how to reach it: client forward, or the preview URL.
func (r *Renderer) ports(env wire.Envelope) {
	var p wire.Ports
	if !r.decode(env, &p) {
		return
	}
	line := "⇢ nothing listens in the sandbox now"
	if len(p.Ports) > 0 {
		list := make([]string, len(p.Ports))
		for i, port := range p.Ports {
			list[i] = fmt.Sprintf("%d (%s)", port.Port, port.Address)
		}
		line = "⇢ listening in the sandbox: " + strings.Join(list, ", ")
		if env.Thread != "" {
			line += fmt.Sprintf(" — client forward %s %d, or /v1/threads/%s/ports/%d/ on the bridge", env.Thread, p.Ports[0].Port, env.Thread, p.Ports[0].Port)
		}
	}
	r.EndLine()
	r.styled(styleDim, line)
	r.write("\n")
}
