package tools_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

func TestLs(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	writeFile(t, filepath.Join(ws, "b.txt"), "hello", 0o644)
	writeFile(t, filepath.Join(ws, "a", "x"), "", 0o644)
	if err := os.Symlink("b.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want []string // line prefixes / substrings, in order
		err  string
	}{
		{".", []string{"dir\t-\t", "\ta/\n", "file\t5\t", "\tb.txt\n", "dir\t-", "\tempty/\n", "link\t", "link -> b.txt\n", "[. : 4 entries]"}, ""},
		{"empty", []string{"(empty is an empty directory)"}, ""},
		{"b.txt", []string{"file\t5\t", "b.txt"}, ""},
		{"nope", nil, "nope does not exist"},
		{"..", nil, "outside the workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := call(t, set, "ls", map[string]any{"path": tt.path})
			if tt.err != "" {
				if !strings.Contains(res.Err, tt.err) {
					t.Errorf("Err = %q, want %q", res.Err, tt.err)
				}
				return
			}
			out := strings.ReplaceAll(res.Output, "[.: ", "[. : ")
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output %q lacks %q (in order)", out, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
	// The default path is the workspace.
	if res := call(t, set, "ls", map[string]any{}); !strings.Contains(res.Output, "4 entries") {
		t.Errorf("ls without path: %q", res.Output)
	}
}

func TestLsCapped(t *testing.T) {
	set, ws := newSet(t, tools.Config{OutputLimit: 500})
	for i := range 100 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%03d", i)), "", 0o644)
	}
	res := call(t, set, "ls", map[string]any{})
	if !res.Truncated || !strings.Contains(res.Output, "of 100 entries shown") || len(res.Output) > 700 {
		t.Errorf("result = %+v", res)
	}
}

func TestEditFile(t *testing.T) {
	const src = "package main\n\nfunc main() {\n\tprintln(\"hi\")\n\tprintln(\"hi\")\n}\n"
	tests := []struct {
		name    string
		file    string
		args    map[string]any
		want    string // content afterwards (empty: unchanged)
		output  string // substring of the output
		errText string
	}{
		{"unique", src, map[string]any{"old": "func main() {", "new": "func Main() {"},
			strings.Replace(src, "func main", "func Main", 1), "replaced 1 occurrence in f.go\n1\tpackage main", ""},
		{"replace all", src, map[string]any{"old": "\"hi\"", "new": "\"yo\"", "replace_all": true},
			strings.ReplaceAll(src, "hi", "yo"), "replaced 2 occurrences", ""},
		{"ambiguous", src, map[string]any{"old": "println(\"hi\")", "new": "x"}, "", "",
			"old matches 2 places (lines 4, 5)"},
		{"not found with hint", src, map[string]any{"old": "func mian() {", "new": "x"}, "", "",
			`the line most like its first line is line 3: "func main() {"`},
		{"trailing whitespace differs", src, map[string]any{"old": "func main() {  \n", "new": "x"}, "", "",
			"matches when trailing whitespace and line endings are ignored"},
		{"crlf differs", "a\r\nb\r\n", map[string]any{"old": "a\nb", "new": "x"}, "", "",
			"matches when trailing whitespace"},
		{"same text", src, map[string]any{"old": "main", "new": "main"}, "", "", "old and new are the same"},
		{"empty old", src, map[string]any{"old": "", "new": "x"}, "", "", "old is empty"},
		{"missing new", src, map[string]any{"old": "x"}, "", "", `missing required argument "new"`},
		{"binary", "a\x00b", map[string]any{"old": "a", "new": "b"}, "", "", "binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, ws := newSet(t, tools.Config{})
			path := filepath.Join(ws, "f.go")
			writeFile(t, path, tt.file, 0o640)
			tt.args["path"] = "f.go"
			res := call(t, set, "edit_file", tt.args)
			if tt.errText != "" {
				if !strings.Contains(res.Err, tt.errText) {
					t.Errorf("Err = %q, want %q", res.Err, tt.errText)
				}
				if got := readFile(t, path); got != tt.file {
					t.Errorf("file changed on a refused edit: %q", got)
				}
				return
			}
			if res.Err != "" || !strings.Contains(res.Output, tt.output) {
				t.Fatalf("result = %+v, want output containing %q", res, tt.output)
			}
			if got := readFile(t, path); got != tt.want {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
			if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
				t.Errorf("mode = %v", st.Mode().Perm())
			}
		})
	}
	set, _ := newSet(t, tools.Config{})
	if res := call(t, set, "edit_file", map[string]any{"path": "nope", "old": "a", "new": "b"}); !strings.Contains(res.Err, "does not exist") {
		t.Errorf("missing file: %q", res.Err)
	}
}

func TestDelete(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "keep"), "x", 0o644)
	writeFile(t, filepath.Join(ws, "f"), "x", 0o644)
	writeFile(t, filepath.Join(ws, "d", "e", "f"), "x", 0o644)
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		recursive bool
		gone      string
		err       string
	}{
		{"f", false, "f", ""},
		{"d", false, "", "is a directory; pass recursive=true"},
		{"d", true, "d", ""},
		{"out/keep", false, "", "outside the workspace"},
		{"out", false, "out", ""}, // the link goes, not its target
		{".", true, "", "is the workspace itself"},
		{ws, true, "", "is the workspace itself"},
		{"..", true, "", "outside the workspace"},
		{"nope", false, "", "nope does not exist"},
	}
	for _, tt := range tests {
		res := call(t, set, "delete", map[string]any{"path": tt.path, "recursive": tt.recursive})
		if tt.err != "" {
			if !strings.Contains(res.Err, tt.err) {
				t.Errorf("delete %s: Err = %q, want %q", tt.path, res.Err, tt.err)
			}
			continue
		}
		if res.Err != "" {
			t.Errorf("delete %s: %q", tt.path, res.Err)
		}
		if _, err := os.Lstat(filepath.Join(ws, tt.gone)); !os.IsNotExist(err) {
			t.Errorf("delete %s: still there (%v)", tt.path, err)
		}
	}
	if got := readFile(t, filepath.Join(outside, "keep")); got != "x" {
		t.Error("the link's target was touched")
	}
}

func TestGlob(t *testing.T) {
	set, ws := newSet(t, tools.Config{OutputLimit: 2000})
	for _, f := range []string{"main.go", "a/b/c.go", "a/b/c_test.go", "a/x.md", ".hidden.go", ".git/config.go", "a/.cache/z.go", "docs/README.md"} {
		writeFile(t, filepath.Join(ws, f), "", 0o644)
	}
	tests := []struct {
		pattern string
		want    string
		err     string
	}{
		{"*.go", "a/b/c.go\na/b/c_test.go\nmain.go\n[3 paths]", ""},
		{"**/*_test.go", "a/b/c_test.go\n[1 paths]", ""},
		{"a/*", "a/b/\na/x.md\n[2 paths]", ""},
		{"*.{md,go}", "a/b/c.go\na/b/c_test.go\na/x.md\ndocs/README.md\nmain.go\n[5 paths]", ""},
		{".hidden.go", ".hidden.go\n[1 paths]", ""},
		{"**/.cache/*", "a/.cache/z.go\n[1 paths]", ""},
		{ws + "/a/b/*.go", "a/b/c.go\na/b/c_test.go\n[2 paths]", ""},
		{"*.rs", "no paths match *.rs", ""},
		{"../*", "", "leaves the workspace"},
		{"/etc/*", "", "outside the workspace"},
		{"[", "", "invalid glob pattern"},
	}
	for _, tt := range tests {
		res := call(t, set, "glob", map[string]any{"pattern": tt.pattern})
		if tt.err != "" {
			if !strings.Contains(res.Err, tt.err) {
				t.Errorf("glob %s: Err = %q, want %q", tt.pattern, res.Err, tt.err)
			}
			continue
		}
		if res.Err != "" || res.Output != tt.want {
			t.Errorf("glob %s = %q (err %q), want %q", tt.pattern, res.Output, res.Err, tt.want)
		}
	}
	small, ws2 := newSet(t, tools.Config{OutputLimit: 100})
	for i := range 50 {
		writeFile(t, filepath.Join(ws2, fmt.Sprintf("f%d.txt", i)), "", 0o644)
	}
	if res := call(t, small, "glob", map[string]any{"pattern": "*.txt"}); !res.Truncated || !strings.Contains(res.Output, "of 50 paths shown") {
		t.Errorf("capped glob: %+v", res)
	}
}
