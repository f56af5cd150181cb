package benchcmp_test

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/e2e/benchcmp"
)

func TestSpreadOf(t *testing.T) {
	cases := []struct {
		xs   []float64
		want *benchcmp.Spread
	}{
		{nil, nil},
		{[]float64{7}, &benchcmp.Spread{Low: 7, Median: 7, High: 7, N: 1}},
		{[]float64{4, 1, 3, 2, 5}, &benchcmp.Spread{Low: 2, Median: 3, High: 4, N: 5}},
		{[]float64{1, 2, 3, 4}, &benchcmp.Spread{Low: 1.75, Median: 2.5, High: 3.25, N: 4}},
	}
	for _, c := range cases {
		if got := benchcmp.SpreadOf(c.xs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", c.xs, got, c.want)
		}
	}
}

func TestBetterFor(t *testing.T) {
	for unit, want := range map[string]benchcmp.Better{
		"ms": benchcmp.Lower, "KiB": benchcmp.Lower, "MiB": benchcmp.Lower,
		"MiB/s": benchcmp.Higher, "events/s": benchcmp.Higher, "of300": benchcmp.Higher,
	} {
		if got := benchcmp.BetterFor(unit); got != want {
			t.Errorf("BetterFor(%q) = %q, want %q", unit, got, want)
		}
	}
}

// fig is a figure with samples (its value their median) or, without
// samples, a single reading.
func fig(name, unit string, better benchcmp.Better, value float64, samples ...float64) benchcmp.Figure {
	return benchcmp.Figure{Name: name, Unit: unit, Better: better, Value: value, Samples: samples}
}

func run(figs ...benchcmp.Figure) benchcmp.Run { return benchcmp.Run{Commit: "c", Figures: figs} }

func TestCompareVerdicts(t *testing.T) {
	lo, hi := benchcmp.Lower, benchcmp.Higher
	cases := []struct {
		name     string
		old, new []benchcmp.Run
		want     benchcmp.Verdict
		delta    float64 // NaN: not defined
	}{
		{"slower beyond the spread", []benchcmp.Run{run(fig("x", "ms", lo, 10, 9, 10, 11))},
			[]benchcmp.Run{run(fig("x", "ms", lo, 15, 14, 15, 16))}, benchcmp.Regressed, 0.5},
		{"faster beyond the spread", []benchcmp.Run{run(fig("x", "ms", lo, 10, 9, 10, 11))},
			[]benchcmp.Run{run(fig("x", "ms", lo, 5, 4, 5, 6))}, benchcmp.Improved, -0.5},
		{"a rate that fell", []benchcmp.Run{run(fig("r", "events/s", hi, 100, 95, 100, 105))},
			[]benchcmp.Run{run(fig("r", "events/s", hi, 50, 45, 50, 55))}, benchcmp.Regressed, -0.5},
		{"overlapping spreads", []benchcmp.Run{run(fig("x", "ms", lo, 10, 8, 10, 14))},
			[]benchcmp.Run{run(fig("x", "ms", lo, 12, 9, 12, 13))}, benchcmp.Within, 0.2},
		{"single readings", []benchcmp.Run{run(fig("m", "MiB", lo, 10))},
			[]benchcmp.Run{run(fig("m", "MiB", lo, 9))}, benchcmp.NoSpread, -0.1},
		// Two runs of a single reading: the runs' values are the spread.
		{"runs as samples", []benchcmp.Run{run(fig("m", "MiB", lo, 10)), run(fig("m", "MiB", lo, 10.2))},
			[]benchcmp.Run{run(fig("m", "MiB", lo, 8)), run(fig("m", "MiB", lo, 8.2))}, benchcmp.Improved, -2 / 10.1},
		{"no direction", []benchcmp.Run{run(fig("b", "ms", "", 1, 1, 1, 1))},
			[]benchcmp.Run{run(fig("b", "ms", "", 2, 2, 2, 2))}, benchcmp.Moved, 1},
		{"new figure", []benchcmp.Run{run()}, []benchcmp.Run{run(fig("n", "ms", lo, 1))}, benchcmp.Added, math.NaN()},
		{"dropped figure", []benchcmp.Run{run(fig("n", "ms", lo, 1))}, []benchcmp.Run{run()}, benchcmp.Dropped, math.NaN()},
		{"unit changed", []benchcmp.Run{run(fig("n", "ms", lo, 1))}, []benchcmp.Run{run(fig("n", "s", lo, 1))}, benchcmp.Unlike, math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := benchcmp.Compare(c.old, c.new)
			if len(got) != 1 {
				t.Fatalf("%d changes, want 1: %+v", len(got), got)
			}
			if got[0].Verdict != c.want {
				t.Errorf("verdict %q, want %q (old %s, new %s)", got[0].Verdict, c.want, got[0].Old, got[0].New)
			}
			if d := got[0].Delta; math.IsNaN(c.delta) != math.IsNaN(d) || !math.IsNaN(d) && math.Abs(d-c.delta) > 1e-9 {
				t.Errorf("delta %v, want %v", d, c.delta)
			}
		})
	}
}

// A run written to JSON reads back the same, and the comparison of two
// runs prints both sides' headers and a line per figure with its spread.
func TestWriteReadPrint(t *testing.T) {
	met, missed := true, false
	old := run(fig("execute_true", "ms", benchcmp.Lower, 2.8, 2.7, 2.8, 2.9, 3.0))
	old.Figures[0].Met = &met
	old.Figures[0].Spread = benchcmp.SpreadOf(old.Figures[0].Samples)
	old.Machine = benchcmp.Machine{CPUs: 2, LoadStart: [3]float64{1.5, 1, 1}, LoadEnd: [3]float64{2.5, 1, 1}}
	path := filepath.Join(t.TempDir(), "old.json")
	if err := benchcmp.Write(path, old); err != nil {
		t.Fatal(err)
	}
	back, err := benchcmp.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, old) {
		t.Fatalf("read back %+v, wrote %+v", back, old)
	}
	cur := run(fig("execute_true", "ms", benchcmp.Lower, 4, 3.9, 4, 4.1), fig("append_bbolt_nosync", "events/s", benchcmp.Higher, 60000))
	cur.Figures[0].Met = &missed
	var b strings.Builder
	benchcmp.Print(&b, []benchcmp.Run{back}, []benchcmp.Run{cur}, benchcmp.Compare([]benchcmp.Run{back}, []benchcmp.Run{cur}))
	out := b.String()
	for _, want := range []string{
		"old: c at", "load 1.5 → 2.5",
		"execute_true", "2.80 ms [2.77–2.92] n4", "4.00 ms [3.95–4.05] n3", "+42.9%", "WORSE, target now MISSED",
		"append_bbolt_nosync", "60000 events/s", "new",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
