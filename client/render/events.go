package render

import (
	"fmt"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// assistantText writes streamed assistant text: as markdown with Color,
// as it is otherwise.
func (r *Renderer) assistantText(s string) {
	if r.color {
		s = r.md.feed(s)
	}
	r.text(s)
}

// text writes s and tracks whether the cursor is left mid-line.
func (r *Renderer) text(s string) {
	if s == "" {
		return
	}
	r.write(s)
	r.midLine = !strings.HasSuffix(s, "\n")
}

// lifecycle renders the bridge's thread events: the sandbox went away or
// was replaced, an egress decision. Usage reports are silent (the client's
// status line shows them).
func (r *Renderer) lifecycle(env wire.Envelope) {
	switch env.Type {
	case wire.TypeUsage:
		return
	case wire.TypeSandboxExited:
		var e wire.SandboxExited
		if !r.decode(env, &e) {
			return
		}
		line := "⚠ sandbox " + string(e.Reason)
		if e.ExitCode != nil {
			line += fmt.Sprintf(" (exit %d)", *e.ExitCode)
		}
		if e.Message != "" {
			line += ": " + e.Message
		}
		r.EndLine()
		r.styled(styleRed, line)
	case wire.TypeSandboxReplaced:
		var e wire.SandboxReplaced
		_ = env.Decode(&e) // the notice stands without its details
		line := "↻ sandbox replaced"
		if e.Reason != "" {
			line += " after " + string(e.Reason)
		}
		line += fmt.Sprintf(": a new sandbox has the workspace and %d events of the conversation", e.Restored)
		r.EndLine()
		r.styled(styleDim, line)
	case wire.TypeEgress:
		var d wire.EgressDecision
		if !r.decode(env, &d) {
			return
		}
		verdict, style := "allowed", styleDim
		if !d.Allowed {
			verdict, style = "denied", styleRed
		}
		target := d.Host
		if d.Port != 0 {
			target = fmt.Sprintf("%s:%d", d.Host, d.Port)
		}
		line := fmt.Sprintf("⇄ %s %s %s", d.Method, target, verdict)
		if d.Reason != "" {
			line += " (" + d.Reason + ")"
		}
		r.EndLine()
		r.styled(style, line)
	case wire.TypeEventsLost:
		var e wire.EventsLost
		_ = env.Decode(&e) // the warning stands without its details
		line := fmt.Sprintf("⚠ %d events lost", e.Count)
		if e.Message != "" {
			line += ": " + e.Message
		}
		r.EndLine()
		r.styled(styleRed, line)
	}
	r.write("\n")
}

// ShowOutput writes a tool call's full output under a title line, each
// line indented, for /expand.
func (r *Renderer) ShowOutput(title, output string) error {
	r.EndLine()
	r.styled(styleBold, title)
	r.write("\n")
	output = strings.TrimRight(strings.ReplaceAll(output, "\r\n", "\n"), "\n")
	for _, l := range strings.Split(output, "\n") {
		r.write(outputIndent + l + "\n")
	}
	return r.err
}
