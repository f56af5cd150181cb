package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/clipperhouse/displaywidth"

	"github.com/boxwire/boxwire/bridge/wire"
)

// ANSI styles used when Options.Color is set.
const (
	styleDim   = "\x1b[2m"
	styleBold  = "\x1b[1m"
	styleRed   = "\x1b[31m"
	styleReset = "\x1b[0m"
)

// Layout.
const (
	outputIndent = "    " // live tool output and result previews
	resultIndent = "  ⎿ " // the result line of a tool call
	maxSummary   = 60     // columns of a tool call's argument summary
	maxPreview   = 4      // lines of a tool result shown when nothing streamed
)

// summaryKeys are the arguments that best summarize a tool call, in order.
var summaryKeys = []string{"command", "path", "file_path", "pattern", "query", "url"}

// Options configure a Renderer.
type Options struct {
	// Color adds ANSI styles and renders assistant text as markdown
	// (headings, bold, code spans, fenced code); set it when the writer
	// is a terminal.
	Color bool
	// Fold (with Color) keeps a running tool call's live output to its
	// last few lines, redrawn in place with cursor movements, and
	// collapses it when the call ends; the whole output stays available
	// through Call. Set it only when nothing else writes between the
	// Renderer's writes (SetFold turns it off while a prompt is shown).
	Fold bool
	// Width reports the terminal's columns (for Fold); nil means 80.
	Width func() int
}

// Renderer writes events to an io.Writer as they arrive. It keeps the
// state a stream needs (is the cursor mid-line, did this call stream
// output), so one Renderer should see one thread's events in order. It is
// not safe for concurrent use.
type Renderer struct {
	w     io.Writer
	color bool
	err   error

	midLine   bool            // the cursor is not at the start of a line
	streamed  bool            // assistant deltas since the last assistant_message
	inOutput  bool            // live tool output is being written
	outStart  bool            // the next output byte starts an indented line
	pendingCR bool            // a tool output chunk ended in \r
	outCalls  map[string]bool // call ids that streamed output

	md    markdown      // assistant text styling (Color)
	fold  bool          // fold live tool output (Options.Fold)
	width func() int    // terminal columns
	calls []*CallRecord // the latest calls, for /expand
	callN int           // calls seen
	win   *window       // the folded output of the running call
}

// New returns a Renderer writing to w.
func New(w io.Writer, opts Options) *Renderer {
	return &Renderer{w: w, color: opts.Color, outCalls: map[string]bool{},
		fold: opts.Fold && opts.Color, width: opts.Width}
}

// SetFold turns folding of live tool output on or off (it needs Color).
// Turn it off while a prompt is on the screen: other output then moves
// the cursor and a fold could not be redrawn in place.
func (r *Renderer) SetFold(on bool) {
	r.freezeWindow()
	r.win = nil
	r.fold = on && r.color
}

// Prompt writes a prompt (bold with Color) on a fresh line and leaves the
// cursor after it, so that an event rendered next starts on a new line.
func (r *Renderer) Prompt(p string) error {
	r.EndLine()
	r.styled(styleBold, p)
	r.midLine = true
	return r.err
}

// EndLine ends the current line if the cursor is mid-line, e.g. before a
// prompt, and reports the first write error so far.
func (r *Renderer) EndLine() error {
	r.finishOutput()
	r.freezeWindow()
	if r.md.pending() {
		r.text(r.md.flush())
	}
	r.newline()
	return r.err
}

// LineEntered tells the Renderer that the user ended a line of input (on
// a terminal the cursor is then at the start of a line).
func (r *Renderer) LineEntered() { r.midLine = false }

// Printf writes a line of the client's own (e.g. a notice), starting on a
// fresh line; with Color it is dim.
func (r *Renderer) Printf(format string, args ...any) error {
	r.EndLine()
	r.styled(styleDim, fmt.Sprintf(format, args...))
	r.write("\n")
	return r.err
}

// Render writes one event and returns the first write error so far.
// Messages that are not events (hello, pong) are ignored; event types this
// version does not know are shown as a dim one-line notice.
func (r *Renderer) Render(env wire.Envelope) error {
	switch env.Type {
	case wire.TypeHello, wire.TypePong, wire.TypePing, wire.TypeUserMessage, wire.TypeInterrupt:
	case wire.TypeUserEcho:
		r.userEcho(env)
	case wire.TypeAssistantDelta:
		var t wire.Text
		if r.decode(env, &t) {
			if r.inOutput || r.win != nil {
				r.EndLine()
				r.win = nil
			}
			r.assistantText(t.Text)
			r.streamed = true
		}
	case wire.TypeAssistantMessage:
		var t wire.Text
		if r.decode(env, &t) {
			if r.inOutput || r.win != nil {
				r.EndLine()
				r.win = nil
			}
			if !r.streamed {
				r.newline()
				r.assistantText(t.Text)
			}
			r.streamed = false
			r.EndLine()
			r.md = markdown{}
		}
	case wire.TypeToolCall:
		r.toolCall(env)
	case wire.TypeToolOutput:
		var o wire.ToolOutput
		if r.decode(env, &o) {
			r.keep(o.CallID, o.Output)
			r.outCalls[o.CallID] = true
			if r.fold {
				r.foldOutput(o)
			} else {
				r.toolOutput(o)
			}
		}
	case wire.TypeToolResult:
		r.toolResult(env)
	case wire.TypeTurnDone:
		r.turnDone(env)
	case wire.TypeError:
		var e wire.Error
		if r.decode(env, &e) {
			r.EndLine()
			r.styled(styleRed, "✗ error: "+e.Error())
			r.write("\n")
		}
	case wire.TypeSandboxExited, wire.TypeSandboxReplaced, wire.TypeUsage, wire.TypeEgress, wire.TypeEventsLost:
		r.lifecycle(env)
	case wire.TypeApprovalDecision:
		r.approvalDecision(env) // approval.go
	case wire.TypeEgressRules:
		r.egressRules(env) // egress.go
	case wire.TypePorts:
		r.ports(env) // ports.go
	default:
		r.EndLine()
		r.styled(styleDim, "· "+string(env.Type))
		r.write("\n")
	}
	return r.err
}

func (r *Renderer) userEcho(env wire.Envelope) {
	var m wire.UserMessage
	if !r.decode(env, &m) {
		return
	}
	r.EndLine()
	r.styled(styleBold, "› "+m.Text)
	r.write("\n")
}

func (r *Renderer) toolCall(env wire.Envelope) {
	var c wire.ToolCall
	if !r.decode(env, &c) {
		return
	}
	r.EndLine()
	sum := summarize(c.Arguments)
	r.record(c, sum)
	r.write("⏺ ")
	r.styled(styleBold, c.Name)
	r.write("(" + sum + ")\n")
}

func (r *Renderer) toolResult(env wire.Envelope) {
	var res wire.ToolResult
	if !r.decode(env, &res) {
		return
	}
	rec := r.recordOf(res.CallID)
	if rec == nil {
		rec = &CallRecord{ID: res.CallID, Name: res.Name}
	}
	rec.Result = &res
	if !r.outCalls[res.CallID] {
		rec.Output = res.Output
	}
	if !r.foldResult(rec) {
		r.EndLine()
	}
	if !r.outCalls[res.CallID] {
		r.preview(res.Output, rec.N)
	}
	delete(r.outCalls, res.CallID)
	line, style := "ok", styleDim
	switch {
	case res.Error != "":
		line, style = "error: "+firstLine(res.Error), styleRed
	case res.ExitCode != nil:
		line = fmt.Sprintf("exit %d", *res.ExitCode)
		if *res.ExitCode != 0 {
			style = styleRed
		}
	}
	if res.Truncated {
		line += fmt.Sprintf(" (truncated: %d bytes)", res.TotalBytes)
	}
	r.write(resultIndent)
	r.styled(style, line)
	r.write("\n")
}

// preview shows the first lines of a result whose output did not stream.
func (r *Renderer) preview(out string, n int) {
	out = strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	if out == "" {
		return
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if i == maxPreview {
			hint := ""
			if r.color && n > 0 {
				hint = fmt.Sprintf(" · /expand %d", n)
			}
			r.styled(styleDim, fmt.Sprintf("%s… +%d lines%s", outputIndent, len(lines)-maxPreview, hint))
			r.write("\n")
			return
		}
		r.styled(styleDim, outputIndent+l)
		r.write("\n")
	}
}

func (r *Renderer) turnDone(env wire.Envelope) {
	var d wire.TurnDone
	if !r.decode(env, &d) {
		return
	}
	r.EndLine()
	r.streamed = false
	switch d.Reason {
	case wire.ReasonStop:
	case wire.ReasonInterrupted:
		r.styled(styleRed, "⏹ interrupted")
		r.write("\n")
	case wire.ReasonStepLimit:
		r.styled(styleRed, "✗ stopped: step limit reached")
		r.write("\n")
	default:
		r.styled(styleRed, "✗ turn ended: "+d.Reason)
		r.write("\n")
	}
}

// decode decodes env's payload, showing a notice when it does not fit.
func (r *Renderer) decode(env wire.Envelope, v any) bool {
	if err := env.Decode(v); err != nil {
		r.EndLine()
		r.styled(styleRed, "✗ bad event: "+err.Error())
		r.write("\n")
		return false
	}
	return true
}

// summarize renders tool arguments as one short line: the most telling
// argument, or the compact JSON object.
func summarize(args json.RawMessage) string {
	var m map[string]any
	s := ""
	if json.Unmarshal(args, &m) == nil {
		for _, k := range summaryKeys {
			if v, ok := m[k].(string); ok {
				s = v
				break
			}
		}
	}
	if s == "" && len(args) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, args) == nil {
			s = b.String()
		}
	}
	line := firstLine(s)
	cut := line != strings.TrimRight(s, "\n")
	if Width(line) > maxSummary {
		line, cut = displaywidth.TruncateString(line, maxSummary, ""), true
	}
	if cut {
		line = strings.TrimRight(line, " ") + " …"
	}
	return line
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimRight(line, "\r")
}
