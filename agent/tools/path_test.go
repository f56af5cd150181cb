package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

// TestPathConfinement runs read_file and write_file on paths inside and
// outside the workspace, with symlinks leading out of it.
func TestPathConfinement(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(outside, "secret"), "secret\n", 0o644)
	writeFile(t, filepath.Join(ws, "dir", "in.txt"), "inside\n", 0o644)
	links := map[string]string{
		"out-dir":  outside,
		"out-file": filepath.Join(outside, "secret"),
		"in-dir":   "dir",
		"in-file":  filepath.Join(ws, "dir", "in.txt"),
	}
	rel, err := filepath.Rel(ws, filepath.Join(outside, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	links["out-relative"] = rel // a relative link climbing out with ..
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		path    string
		allowed bool
	}{
		{"dir/in.txt", true},
		{"./dir/../dir/in.txt", true},
		{filepath.Join(ws, "dir", "in.txt"), true},
		{"in-dir/in.txt", true},
		{"in-file", true},
		{"new/deeper/file.txt", true},
		{"..", false},
		{"../x", false},
		{"dir/../../x", false},
		{"/etc/passwd", false},
		{filepath.Join(outside, "secret"), false},
		{"out-dir/secret", false},
		{"out-dir/new-file", false},
		{"out-dir/new/deeper", false},
		{"out-file", false},
		{"out-relative", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			w := call(t, set, "write_file", map[string]string{"path": tt.path, "content": "written\n"})
			r := call(t, set, "read_file", map[string]string{"path": tt.path})
			if tt.allowed {
				if w.Err != "" || r.Err != "" {
					t.Fatalf("refused: write %q, read %q", w.Err, r.Err)
				}
				if !strings.Contains(r.Output, "1\twritten\n") {
					t.Errorf("read back %q", r.Output)
				}
				return
			}
			for _, res := range []tools.Result{w, r} {
				if !strings.Contains(res.Err, "outside the workspace") {
					t.Errorf("Err = %q, want a refusal", res.Err)
				}
			}
		})
	}
	if got := readFile(t, filepath.Join(outside, "secret")); got != "secret\n" {
		t.Errorf("outside file changed to %q", got)
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Errorf("outside directory holds %d entries (%v), want 1", len(entries), err)
	}
}

func TestMissingWorkspace(t *testing.T) {
	set := tools.New(tools.Config{Workspace: filepath.Join(t.TempDir(), "gone")})
	for _, name := range []string{"read_file", "write_file", "execute"} {
		res := call(t, set, name, map[string]string{"path": "x", "content": "", "command": "true"})
		if !strings.Contains(res.Err, "workspace") {
			t.Errorf("%s: Err = %q, want a workspace error", name, res.Err)
		}
	}
}
