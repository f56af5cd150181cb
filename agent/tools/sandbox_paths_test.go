package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

// TestSandboxPaths: a call with "sandbox_paths": true may name absolute
// paths in the sandbox roots besides the workspace, and nothing else; a
// call without it stays in the workspace.
func TestSandboxPaths(t *testing.T) {
	sbx, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, ws := newSet(t, tools.Config{SandboxRoots: []string{sbx}})
	writeFile(t, filepath.Join(outside, "secret"), "secret\n", 0o644)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(sbx, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sbx, "dir-out")); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(sbx, "a", "b.txt")

	if r := call(t, set, "write_file", map[string]any{"path": in, "content": "x"}); r.Err == "" {
		t.Fatalf("write_file %s without sandbox_paths: %q, want a refusal", in, r.Output)
	}
	if r := call(t, set, "write_file", map[string]any{"path": in, "content": "needle\n", "sandbox_paths": true}); r.Err != "" {
		t.Fatalf("write_file %s: %s", in, r.Err)
	}
	if got := readFile(t, in); got != "needle\n" {
		t.Fatalf("%s holds %q", in, got)
	}
	refused := []string{
		filepath.Join(outside, "secret"),
		filepath.Join(sbx, "link-out"),
		filepath.Join(sbx, "dir-out", "secret"),
		filepath.Join(sbx, "..", filepath.Base(outside), "secret"),
		"/etc/passwd",
	}
	for _, p := range refused {
		if r := call(t, set, "read_file", map[string]any{"path": p, "sandbox_paths": true}); r.Err == "" || !strings.Contains(r.Err, "outside") {
			t.Errorf("read_file %s: Err %q, Output %q; want a refusal", p, r.Err, r.Output)
		}
	}
	if r := call(t, set, "delete", map[string]any{"path": sbx, "recursive": true, "sandbox_paths": true}); r.Err == "" {
		t.Errorf("delete of the sandbox root itself: %q, want a refusal", r.Output)
	}
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_file", map[string]any{"path": in}, "1\tneedle"},
		{"ls", map[string]any{"path": filepath.Dir(in)}, "b.txt"},
		{"edit_file", map[string]any{"path": in, "old": "needle", "new": "pin"}, "replaced 1 occurrence"},
		{"glob", map[string]any{"pattern": "*.txt", "path": sbx}, "a/b.txt\n"},
		{"grep", map[string]any{"pattern": "pin", "path": sbx, "mode": "content"}, "a/b.txt:1: pin"},
		{"grep", map[string]any{"pattern": "pin", "path": sbx, "mode": "content", "glob": "a/*.txt"}, "a/b.txt:1: pin"},
	}
	for _, tt := range tests {
		tt.args["sandbox_paths"] = true
		r := call(t, set, tt.tool, tt.args)
		if r.Err != "" || !strings.Contains(r.Output, tt.want) {
			t.Errorf("%s %v: Err %q, Output %q; want %q", tt.tool, tt.args, r.Err, r.Output, tt.want)
		}
	}
	// The workspace still works as before, relative paths included.
	writeFile(t, filepath.Join(ws, "w.txt"), "pin\n", 0o644)
	if r := call(t, set, "grep", map[string]any{"pattern": "pin", "mode": "content"}); r.Err != "" || !strings.Contains(r.Output, "w.txt:1: pin") {
		t.Errorf("grep in the workspace: Err %q, Output %q", r.Err, r.Output)
	}
}

// TestGlobPath: glob searches from path, and its results are relative to it.
func TestGlobPath(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	writeFile(t, filepath.Join(ws, "sub", "deep", "x.py"), "", 0o644)
	writeFile(t, filepath.Join(ws, "top.py"), "", 0o644)
	r := call(t, set, "glob", map[string]any{"pattern": "*.py", "path": "sub"})
	if r.Err != "" || r.Output != "deep/x.py\n[1 paths]" {
		t.Fatalf("glob *.py in sub: Err %q, Output %q", r.Err, r.Output)
	}
	r = call(t, set, "glob", map[string]any{"pattern": filepath.Join(ws, "sub", "**", "*.py"), "path": "sub"})
	if r.Err != "" || !strings.HasPrefix(r.Output, "deep/x.py\n") {
		t.Fatalf("absolute glob in sub: Err %q, Output %q", r.Err, r.Output)
	}
	if r := call(t, set, "glob", map[string]any{"pattern": "*", "path": "top.py"}); r.Err == "" {
		t.Fatalf("glob in a file: %q, want an error", r.Output)
	}
}
