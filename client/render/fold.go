package render

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/clipperhouse/displaywidth"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Folding of live tool output (Options.Fold).
const (
	foldLines     = 5       // lines of a running call's output kept in view
	foldTail      = 3       // lines left in view when the call is over
	maxKeptOutput = 4 << 20 // bytes of output a CallRecord keeps
	maxKeptCalls  = 200     // calls a Renderer remembers for /expand
)

// CallRecord is what a Renderer kept of one tool call, for /expand.
type CallRecord struct {
	// N numbers the call from 1 in the order the Renderer saw calls.
	N    int
	ID   string
	Name string
	// Summary is the one-line argument summary shown with the call.
	Summary string
	// Output is the live output as it streamed (at most 4 MiB; Capped
	// says more was cut), or the result's output when nothing streamed.
	Output string
	Capped bool
	// Result is the call's result, nil while it runs.
	Result *wire.ToolResult
}

// window is the folded view of the running call's output: the last
// foldLines lines, redrawn in place.
type window struct {
	call    *CallRecord
	lines   []string // the last complete lines, at most foldLines
	partial string   // the line being written
	total   int      // complete lines so far
	cr      bool     // the previous chunk ended in \r
	rows    int      // rows drawn on the screen, to erase on redraw
}

// Calls returns how many calls the Renderer remembers; Call(n) for n from
// Calls()-… to Calls() are available (older ones are forgotten).
func (r *Renderer) Calls() int { return r.callN }

// Call returns the record of call n (1-based), or false when it is unknown
// or forgotten.
func (r *Renderer) Call(n int) (CallRecord, bool) {
	for _, c := range r.calls {
		if c.N == n {
			return *c, true
		}
	}
	return CallRecord{}, false
}

// record starts the record of a call.
func (r *Renderer) record(c wire.ToolCall, summary string) *CallRecord {
	r.callN++
	rec := &CallRecord{N: r.callN, ID: c.CallID, Name: c.Name, Summary: summary}
	if len(r.calls) == maxKeptCalls {
		r.calls = r.calls[1:]
	}
	r.calls = append(r.calls, rec)
	return rec
}

// recordOf finds the latest record of call id.
func (r *Renderer) recordOf(id string) *CallRecord {
	for i := len(r.calls) - 1; i >= 0; i-- {
		if r.calls[i].ID == id {
			return r.calls[i]
		}
	}
	return nil
}

// keep appends streamed output to a call's record.
func (r *Renderer) keep(id, out string) {
	rec := r.recordOf(id)
	if rec == nil || rec.Capped {
		return
	}
	if room := maxKeptOutput - len(rec.Output); len(out) > room {
		out, rec.Capped = out[:room], true
	}
	rec.Output += out
}

// foldOutput adds a chunk of a call's live output to its window and
// redraws the window.
func (r *Renderer) foldOutput(o wire.ToolOutput) {
	if r.win == nil || r.win.call == nil || r.win.call.ID != o.CallID {
		r.EndLine() // freezes another call's window where it is
		r.win = &window{call: r.recordOf(o.CallID)}
		if r.win.call == nil {
			r.win.call = &CallRecord{ID: o.CallID}
		}
	}
	w := r.win
	s := o.Output
	if w.cr {
		s, w.cr = "\r"+s, false
	}
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			w.partial += s
			break
		}
		w.partial += s[:i]
		switch {
		case s[i] == '\n':
			s = s[i+1:]
		case i+1 == len(s):
			w.cr = true
			s = ""
			continue
		case s[i+1] == '\n':
			s = s[i+2:]
		default: // a lone \r: the line starts over
			w.partial, s = "", s[i+1:]
			continue
		}
		w.lines = append(w.lines, w.partial)
		if len(w.lines) > foldLines {
			w.lines = w.lines[1:]
		}
		w.partial = ""
		w.total++
	}
	r.drawWindow(foldLines, "")
}

// drawWindow erases the window and draws its last n lines (plus the line
// being written), after a header counting the lines out of view; hint is
// added to the header.
func (r *Renderer) drawWindow(n int, hint string) {
	w := r.win
	r.eraseWindow()
	lines := w.lines
	if w.partial != "" {
		lines = append(lines[:len(lines):len(lines)], w.partial)
	}
	all := w.total
	if w.partial != "" {
		all++
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if hidden := all - len(lines); hidden > 0 {
		r.styled(styleDim, fmt.Sprintf("%s… +%d lines%s", outputIndent, hidden, hint))
		r.write("\n")
		w.rows++
	}
	width := r.columns() - len(outputIndent) - 1
	for _, l := range lines {
		r.styled(styleDim, outputIndent+clip(l, width))
		r.write("\n")
		w.rows++
	}
	r.midLine = false
}

// eraseWindow removes the window's rows from the screen.
func (r *Renderer) eraseWindow() {
	if r.win == nil || r.win.rows == 0 {
		return
	}
	r.write(fmt.Sprintf("\x1b[%dF\x1b[J", r.win.rows))
	r.win.rows = 0
}

// foldResult collapses the window of a finished call to its last lines
// and a count, with the /expand hint; it reports whether the call had a
// window on screen.
func (r *Renderer) foldResult(rec *CallRecord) bool {
	if r.win == nil || r.win.call != rec || r.win.rows == 0 {
		r.win = nil
		return false
	}
	hint := ""
	if rec.N > 0 {
		hint = fmt.Sprintf(" · /expand %d", rec.N)
	}
	r.drawWindow(foldTail, hint)
	r.win = nil
	return true
}

// freezeWindow leaves the window on screen as it is: something else is
// about to be written below it.
func (r *Renderer) freezeWindow() {
	if r.win != nil {
		r.win.rows = 0
	}
}

func (r *Renderer) columns() int {
	if r.width != nil {
		if n := r.width(); n > 20 {
			return n
		}
	}
	return 80
}

// ansi matches escape sequences (CSI, OSC, two-byte) in command output.
var ansi = regexp.MustCompile("\x1b(\\[[0-9;?]*[ -/]*[@-~]|\\][^\x07\x1b]*(\x07|\x1b\\\\)|[@-Z\\\\-_])")

// clip strips escape sequences and control characters from a line of
// output and cuts it to width terminal columns (wide characters count two,
// combining and zero-width ones nothing; grapheme clusters stay whole), so
// that it fills at most one screen row.
func clip(s string, width int) string {
	s = ansi.ReplaceAllString(s, "")
	s = strings.Map(func(c rune) rune {
		if c == '\t' {
			return ' '
		}
		if unicode.IsControl(c) {
			return -1
		}
		return c
	}, s)
	if width < 2 {
		return s
	}
	return displaywidth.TruncateString(s, width, "…")
}

// Width is the number of terminal columns s takes: East Asian wide and
// fullwidth characters and emoji take two, combining marks and zero-width
// characters none. Escape sequences are not recognised: strip them first.
func Width(s string) int { return displaywidth.String(s) }
