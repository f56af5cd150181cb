package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/e2e/benchcmp"
)

// Two runs on the old side count together; a file that is not there is
// an error naming it.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, samples ...float64) string {
		path := filepath.Join(dir, name)
		f := benchcmp.Figure{Name: "relay_added", Unit: "ms", Better: benchcmp.Lower, Value: samples[0], Samples: samples}
		if err := benchcmp.Write(path, benchcmp.Run{Commit: name, Figures: []benchcmp.Figure{f}}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b, c := write("a", 0.1, 0.1), write("b", 0.12, 0.12), write("c", 0.3, 0.31)
	var out, errs strings.Builder
	if err := run([]string{"-old", a + "," + b, "-new", c}, &out, &errs); err != nil {
		t.Fatalf("run: %v (%s)", err, errs.String())
	}
	if s := out.String(); !strings.Contains(s, "old: a at") || !strings.Contains(s, "old: b at") || !strings.Contains(s, "n4 ×2") || !strings.Contains(s, "WORSE") {
		t.Errorf("output:\n%s", s)
	}
	if err := run([]string{"-old", a, "-new", filepath.Join(dir, "missing.json")}, &out, &errs); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	if err := run([]string{"-old", a}, &out, &errs); err == nil {
		t.Error("no -new: no error")
	}
}
