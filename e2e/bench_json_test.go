package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/e2e/benchcmp"
)

// benchJSON is where the run's results go as JSON (make bench sets it);
// empty: build/bench-TIME.json at the top of the repository.
var benchJSON = os.Getenv("BOXWIRE_BENCH_JSON")

// writeJSON writes the run as benchcmp.Run (what `make bench-compare`
// reads) and prints the path.
func (r *report) writeJSON(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	path := benchJSON
	if path == "" {
		path = filepath.Join(root, "build", "bench-"+r.started.Format("20060102-150405")+".json")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	run := benchcmp.Run{
		Started: r.started, Took: time.Since(r.started).Seconds(),
		Commit: output(root, "git", "describe", "--always", "--dirty"),
		Image:  image, ImageID: output(root, "docker", "image", "inspect", "-f", "{{.Id}}", image),
		Only: os.Getenv("BOXWIRE_BENCH_ONLY"),
		Machine: benchcmp.Machine{Host: host, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
			Kernel: output(root, "uname", "-r"), LoadStart: r.load, LoadEnd: loadAvg()},
	}
	for _, f := range r.figs {
		better := f.better
		switch better {
		case "":
			better = benchcmp.BetterFor(f.unit)
		case "none":
			better = ""
		}
		run.Figures = append(run.Figures, benchcmp.Figure{
			Name: f.name, Value: f.value, Unit: f.unit, Better: better,
			Samples: f.samples, Spread: benchcmp.SpreadOf(f.samples),
			Ratio: f.ratio, Target: f.target, Met: f.met, Note: f.note, Load: f.load,
		})
	}
	if err := benchcmp.Write(path, run); err != nil {
		t.Fatalf("write the results: %v", err)
	}
	os.Stdout.WriteString("bench: results as JSON in " + path + "\n")
}

// output is a command's trimmed standard output, "" when it fails.
func output(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// loadAvg is the machine's 1, 5 and 15 minute load averages.
func loadAvg() [3]float64 {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(data)) {
		if i < 3 {
			l[i], _ = strconv.ParseFloat(f, 64)
		}
	}
	return l
}
