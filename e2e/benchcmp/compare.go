package benchcmp

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Side is one figure over the runs of one side of a comparison.
type Side struct {
	Unit string
	// Value is the median of the runs' values.
	Value float64
	// Spread is the interquartile range of every run's samples together,
	// or of the runs' values when the figure has no samples and there are
	// two runs or more; nil otherwise.
	Spread *Spread
	Runs   int
	// Met is the last run's verdict on the target (nil: no target).
	Met *bool
}

// Verdict is what a Change amounts to.
type Verdict string

// The verdicts of Compare.
const (
	Improved  Verdict = "better"        // beyond the spread, in the better direction
	Regressed Verdict = "WORSE"         // beyond the spread, in the worse direction
	Moved     Verdict = "moved"         // beyond the spread, a figure with no better direction
	Within    Verdict = "within spread" // a side's value inside the other's spread
	NoSpread  Verdict = "no spread"     // neither side has samples: only the change is known
	Added     Verdict = "new"           // only in the new runs
	Dropped   Verdict = "gone"          // only in the old runs
	Unlike    Verdict = "unit changed"  // not comparable
)

// Change is one figure's change from the old runs to the new.
type Change struct {
	Name     string
	Old, New *Side // nil: not on that side
	Better   Better
	// Delta is (new − old) / |old|; NaN when it is not defined.
	Delta   float64
	Verdict Verdict
}

// Compare summarizes each figure over the old runs and the new runs and
// says how it changed, in the order the figures first appear (old runs
// first, then figures only the new runs have).
func Compare(old, new []Run) []Change {
	var names []string
	seen := map[string]bool{}
	for _, r := range slices.Concat(old, new) {
		for _, f := range r.Figures {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
	}
	out := make([]Change, 0, len(names))
	for _, name := range names {
		o, ob := side(old, name)
		n, nb := side(new, name)
		c := Change{Name: name, Old: o, New: n, Better: nb, Delta: math.NaN()}
		if n == nil {
			c.Better = ob
		}
		c.Verdict = verdict(&c)
		out = append(out, c)
	}
	return out
}

// side is figure name over runs; nil when no run has it.
func side(runs []Run, name string) (*Side, Better) {
	var s *Side
	var better Better
	var values, samples []float64
	for _, r := range runs {
		for _, f := range r.Figures {
			if f.Name != name {
				continue
			}
			if s == nil {
				s = &Side{Unit: f.Unit}
			}
			s.Runs++
			s.Met = f.Met
			better = f.Better
			values = append(values, f.Value)
			samples = append(samples, f.Samples...)
		}
	}
	if s == nil {
		return nil, ""
	}
	s.Value = SpreadOf(values).Median
	switch {
	case len(samples) > 0:
		s.Spread = SpreadOf(samples)
	case len(values) >= 2:
		s.Spread = SpreadOf(values)
	}
	return s, better
}

func verdict(c *Change) Verdict {
	switch {
	case c.Old == nil:
		return Added
	case c.New == nil:
		return Dropped
	case c.Old.Unit != c.New.Unit:
		return Unlike
	}
	if c.Old.Value != 0 {
		c.Delta = (c.New.Value - c.Old.Value) / math.Abs(c.Old.Value)
	}
	if c.Old.Spread == nil && c.New.Spread == nil {
		return NoSpread
	}
	// Beyond: each value lies outside the other side's spread (a side
	// without one has only its value).
	if inside(c.New.Value, c.Old.Spread) || inside(c.Old.Value, c.New.Spread) || c.New.Value == c.Old.Value {
		return Within
	}
	up := c.New.Value > c.Old.Value
	switch c.Better {
	case Lower:
		if up {
			return Regressed
		}
		return Improved
	case Higher:
		if up {
			return Improved
		}
		return Regressed
	}
	return Moved
}

func inside(v float64, s *Spread) bool { return s != nil && v >= s.Low && v <= s.High }

// Print writes the comparison: a header naming both sides' runs (commit,
// date, load), then one line per figure: old and new value with their
// spread, the change and its verdict.
func Print(w io.Writer, old, new []Run, changes []Change) {
	for _, set := range []struct {
		label string
		runs  []Run
	}{{"old", old}, {"new", new}} {
		for _, r := range set.runs {
			fmt.Fprintf(w, "%s: %s at %s, %d CPUs, load %.1f → %.1f, image %s", set.label, r.Commit,
				r.Started.Format("2006-01-02 15:04"), r.Machine.CPUs, r.Machine.LoadStart[0], r.Machine.LoadEnd[0], r.Image)
			if r.Only != "" {
				fmt.Fprintf(w, ", only %s", r.Only)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\n%-28s %-34s %-34s %8s  %s\n", "figure", "old [p25–p75] n", "new [p25–p75] n", "change", "verdict")
	for _, c := range changes {
		delta := ""
		if !math.IsNaN(c.Delta) {
			delta = fmt.Sprintf("%+.1f%%", 100*c.Delta)
		}
		verdict := string(c.Verdict)
		if c.New != nil && c.New.Met != nil && !*c.New.Met && (c.Old == nil || c.Old.Met == nil || *c.Old.Met) {
			verdict += ", target now MISSED"
		}
		fmt.Fprintf(w, "%-28s %-34s %-34s %8s  %s\n", c.Name, c.Old.String(), c.New.String(), delta, verdict)
	}
}

// String is "VALUE UNIT [LOW–HIGH] nN", or "—" for a missing side.
func (s *Side) String() string {
	if s == nil {
		return "—"
	}
	var b strings.Builder
	b.WriteString(num(s.Value) + " " + s.Unit)
	if s.Spread != nil {
		fmt.Fprintf(&b, " [%s–%s] n%d", num(s.Spread.Low), num(s.Spread.High), s.Spread.N)
	}
	if s.Runs > 1 {
		fmt.Fprintf(&b, " ×%d", s.Runs)
	}
	return b.String()
}

// num prints about four significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
