package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/e2e/benchcmp"
)

// benchEnabled turns the figures of TestBenchmarks on (make bench sets it).
var benchEnabled = os.Getenv("BOXWIRE_BENCH") == "1"

// figure is one line of the benchmark table.
type figure struct {
	name   string  // machine-readable name, e.g. relay_added
	value  float64 // in unit
	unit   string
	ratio  float64 // 0: not a comparison
	target string  // what the issue asks for, in words
	met    *bool   // whether the target was reached; nil: no target
	note   string  // what was compared, both sides
	// extra and after go into the machine-readable line: extra after the
	// unit (e.g. "ref=50.000 MiB/s"), after after the ratio (e.g.
	// "worst_round=0.800").
	extra, after string
	// samples are the figure's rounds in unit, for the JSON results and
	// bench-compare's spread (nil: a single reading).
	samples []float64
	// better overrides the direction of improvement benchcmp.BetterFor
	// gives the unit; "none" for a figure only reported.
	better benchcmp.Better
	load   float64 // the 1-minute load average when it was added
}

// report collects figures and prints them at the end.
type report struct {
	started time.Time
	load    [3]float64 // when the run started
	figs    []figure
}

// newReport starts a run's report: its start and the machine's load.
func newReport() *report { return &report{started: time.Now(), load: loadAvg()} }

func (r *report) add(f figure) {
	f.load = loadAvg()[0]
	r.figs = append(r.figs, f)
}

// print writes the table, then one `bench: NAME=VALUE UNIT [ratio=R]` line
// per figure.
func (r *report) print(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-26s %14s  %-8s %-6s %s\n", "figure", "value", "ratio", "target", "measured as")
	for _, f := range r.figs {
		ratio := ""
		if f.ratio != 0 {
			ratio = strconv.FormatFloat(f.ratio, 'f', 3, 64)
		}
		verdict := ""
		if f.met != nil {
			verdict = map[bool]string{true: "met", false: "MISSED"}[*f.met]
		}
		target := ""
		if f.target != "" {
			target = " — target " + f.target
		}
		fmt.Fprintf(&b, "%-26s %10.3f %-4s %-8s %-6s %s%s\n", f.name, f.value, f.unit, ratio, verdict, f.note, target)
	}
	b.WriteString("\n")
	for _, f := range r.figs {
		line := fmt.Sprintf("bench: %s=%s %s", f.name, strconv.FormatFloat(f.value, 'f', 3, 64), f.unit)
		if f.extra != "" {
			line += " " + f.extra
		}
		if f.ratio != 0 {
			line += " ratio=" + strconv.FormatFloat(f.ratio, 'f', 3, 64)
		}
		if f.after != "" {
			line += " " + f.after
		}
		if f.met != nil && !*f.met {
			line += " MISSED"
		}
		b.WriteString(line + "\n")
	}
	// Straight to stdout, so the table reads as one block in `make bench`.
	fmt.Print(b.String())
	t.Log("benchmark table printed above")
	r.writeJSON(t) // bench_json_test.go
}

func met(ok bool) *bool { return &ok }

// median of durations, in milliseconds.
func medianMS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var m time.Duration
	if n := len(s); n%2 == 1 {
		m = s[n/2]
	} else {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return float64(m) / float64(time.Millisecond)
}

// msOf is durations in milliseconds, for a figure's samples.
func msOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// addedMS is, round by round, how many milliseconds a took more than b
// (interleave's pairs): the samples of a figure that is a difference.
func addedMS(a, b []time.Duration) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = float64(a[i]-b[i]) / float64(time.Millisecond)
	}
	return out
}

// timedPing times a ping on c (a no-op round trip the agent answers).
func timedPing(t *testing.T, ctx context.Context, c *chat.Conn) func() time.Duration {
	return func() time.Duration {
		d, err := c.Ping(ctx)
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		return d
	}
}

// perRound is f of each duration: a rate figure's samples.
func perRound(ds []time.Duration, f func(time.Duration) float64) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = f(d)
	}
	return out
}

// percentileMS is the p-th percentile (0 < p ≤ 100) by nearest rank.
func percentileMS(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// interleave runs a and b alternately for rounds, swapping which goes first
// each round so neither side always runs warm, and returns their timings.
func interleave(t *testing.T, rounds int, a, b func() time.Duration) (as, bs []time.Duration) {
	t.Helper()
	out := interleaveAll(t, rounds, a, b)
	return out[0], out[1]
}

// interleaveAll runs every side once a round for rounds, the round's first
// side moving on by one each round (for two sides: swapping), and returns
// each side's timings in the order of sides.
func interleaveAll(t *testing.T, rounds int, sides ...func() time.Duration) [][]time.Duration {
	t.Helper()
	out := make([][]time.Duration, len(sides))
	for i := range rounds {
		for j := range sides {
			k := (i + j) % len(sides)
			out[k] = append(out[k], sides[k]())
		}
	}
	return out
}

// rssKiB reads VmRSS of a process on this host from /proc.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	return statusOf(t, pid, "VmRSS:")
}

// statusKiB finds a "Key:   N kB" line of a /proc status file.
func statusKiB(t *testing.T, sc *bufio.Scanner, key string) int64 {
	t.Helper()
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == key {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatalf("parse %s: %v", key, err)
			}
			return n
		}
	}
	t.Fatalf("no %s line", key)
	return 0
}

// startProcess starts cmd, its standard error the test's, and has it
// killed and waited for when the test ends; what names it in a failure.
func startProcess(t *testing.T, cmd *exec.Cmd, what string) {
	t.Helper()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}
