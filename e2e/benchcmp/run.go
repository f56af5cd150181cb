package benchcmp

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Run is one `make bench` run, as written to build/bench-*.json.
type Run struct {
	// Started and Took are when the run began and how long it took.
	Started time.Time `json:"started"`
	Took    float64   `json:"took_seconds"`
	// Commit is `git describe --always --dirty` of the tree measured.
	Commit string `json:"commit"`
	// Image is the sandbox image and its id.
	Image   string `json:"image"`
	ImageID string `json:"image_id,omitempty"`
	// Only is BOXWIRE_BENCH_ONLY: the figures selected ("": all).
	Only    string   `json:"only,omitempty"`
	Machine Machine  `json:"machine"`
	Figures []Figure `json:"figures"`
}

// Machine is where a run ran.
type Machine struct {
	Host      string `json:"host"`
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	// LoadStart and LoadEnd are the 1, 5 and 15 minute load averages
	// (/proc/loadavg) when the run began and ended.
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
}

// Better says which direction of a figure is an improvement.
type Better string

// The directions of Better.
const (
	Lower  Better = "lower"  // times, memory
	Higher Better = "higher" // rates, counts of successes
)

// Figure is one figure of a run.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Better is the direction of improvement; "" for a figure that is
	// only reported (a breakdown).
	Better Better `json:"better,omitempty"`
	// Samples are the figure's rounds, in Unit (none: a single reading).
	// Value is their median, or what the figure computes from them (a
	// difference of two sides' medians).
	Samples []float64 `json:"samples,omitempty"`
	// Spread is the interquartile range of Samples; nil without samples.
	Spread *Spread `json:"spread,omitempty"`
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target,omitempty"`
	// Met says whether the target was reached; nil: no target.
	Met  *bool  `json:"met,omitempty"`
	Note string `json:"note,omitempty"`
	// Load is the 1-minute load average when the figure was taken.
	Load float64 `json:"load"`
}

// Spread is a range of samples.
type Spread struct {
	Low    float64 `json:"p25"`
	Median float64 `json:"median"`
	High   float64 `json:"p75"`
	N      int     `json:"n"`
}

// SpreadOf is the quartiles of xs; nil when xs is empty.
func SpreadOf(xs []float64) *Spread {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return &Spread{Low: quantile(s, 0.25), Median: quantile(s, 0.5), High: quantile(s, 0.75), N: len(s)}
}

// quantile of sorted s, interpolated between the two nearest ranks.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}

// BetterFor is the usual direction of a unit: higher for rates
// ("MiB/s", "events/s") and counts of successes ("of100"), lower for the
// rest (times, sizes).
func BetterFor(unit string) Better {
	if strings.HasSuffix(unit, "/s") || strings.HasPrefix(unit, "of") {
		return Higher
	}
	return Lower
}

// Write writes r as indented JSON to path.
func Write(path string, r Run) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read reads a run written by Write.
func Read(path string) (Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Run{}, err
	}
	var r Run
	if err := json.Unmarshal(data, &r); err != nil {
		return Run{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
