package render

import (
	"github.com/boxwire/boxwire/bridge/wire"
)

// approvalDecision shows who decided an approval and how: one line, red
// for a denial. (The request itself is shown by whoever asks: the CLI.)
func (r *Renderer) approvalDecision(env wire.Envelope) {
	var d wire.ApprovalDecision
	if !r.decode(env, &d) {
		return
	}
	line := d.Verdict + " by " + d.By
	if d.ApprovalID != "" {
		line = "approval " + d.ApprovalID + ": " + line
	}
	if d.Rule != "" {
		line += " [rule: " + d.Rule + "]"
	}
	if d.Reason != "" {
		line += " — " + d.Reason
	}
	r.EndLine()
	if d.Verdict == wire.VerdictApproved {
		r.styled(styleDim, "✓ "+line)
	} else {
		r.styled(styleRed, "✗ "+line)
	}
	r.write("\n")
}
