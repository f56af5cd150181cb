package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

// grepTree writes a small tree with the cases grep must get right.
func grepTree(t *testing.T, ws string) {
	files := map[string]string{
		"main.go":          "package main\n\nfunc main() {\n\tprintln(\"Hello, World\")\n}\n",
		"lib/util.go":      "package lib\n\n// hello helps.\nfunc Hello() string { return \"hello\" }\n",
		"lib/util_test.go": "package lib\n\nfunc TestHello(t *testing.T) {}\n",
		"a.b":              "hello from a.b\r\n",
		"a/z.txt":          "hello in a/\nno newline at end: hello",
		".env":             "HELLO=1\n",
		".git/HEAD":        "hello git\n",
		"bin.dat":          "hello\x00binary\n",
		"latin1.txt":       "caf\xe9 hello\n",
		"empty":            "",
		"regex.txt":        "a.c\nabc\n",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(ws, name), content, 0o644)
	}
	if err := os.Symlink("main.go", filepath.Join(ws, "link.go")); err != nil {
		t.Fatal(err)
	}
}

var grepCases = []struct {
	name string
	args map[string]any
	want string
}{
	{"files default", map[string]any{"pattern": "hello"},
		"a.b\na/z.txt\nlatin1.txt\nlib/util.go\n[4 files]"},
	{"ignore case", map[string]any{"pattern": "hello", "ignore_case": true},
		".env\na.b\na/z.txt\nlatin1.txt\nlib/util.go\nlib/util_test.go\nmain.go\n[7 files]"},
	{"content", map[string]any{"pattern": "hello", "mode": "content"},
		"a.b:1: hello from a.b\na/z.txt:1: hello in a/\na/z.txt:2: no newline at end: hello\nlatin1.txt:1: caf\uFFFD hello\nlib/util.go:3: // hello helps.\nlib/util.go:4: func Hello() string { return \"hello\" }\n[6 matching lines]"},
	{"count", map[string]any{"pattern": "hello", "mode": "count", "ignore_case": true},
		".env: 1\na.b: 1\na/z.txt: 2\nlatin1.txt: 1\nlib/util.go: 2\nlib/util_test.go: 1\nmain.go: 1\n[7 files]"},
	{"literal by default", map[string]any{"pattern": "a.c", "mode": "content"},
		"regex.txt:1: a.c\n[1 matching lines]"},
	{"regex", map[string]any{"pattern": "^a.c$", "regex": true, "mode": "content"},
		"regex.txt:1: a.c\nregex.txt:2: abc\n[2 matching lines]"},
	{"glob", map[string]any{"pattern": "hello", "glob": "*.go", "ignore_case": true},
		"lib/util.go\nlib/util_test.go\nmain.go\n[3 files]"},
	{"path", map[string]any{"pattern": "Hello", "path": "lib", "mode": "content"},
		"lib/util.go:4: func Hello() string { return \"hello\" }\nlib/util_test.go:3: func TestHello(t *testing.T) {}\n[2 matching lines]"},
	{"single file", map[string]any{"pattern": "func", "path": "main.go"},
		"main.go\n[1 files]"},
	{"max results", map[string]any{"pattern": "hello", "ignore_case": true, "max_results": 2},
		".env\na.b\n[stopped after 2 files; there are more: narrow the search with path or glob, or raise max_results]"},
	{"max content lines", map[string]any{"pattern": "hello", "mode": "content", "max_results": 1},
		"a.b:1: hello from a.b\n[stopped after 1 matching lines; there are more: narrow the search with path or glob, or raise max_results]"},
	{"no match", map[string]any{"pattern": "zebra"}, `no matches for "zebra"`},
}

func TestGrep(t *testing.T) {
	backends := []struct {
		name string
		cfg  tools.Config
	}{{"go", tools.Config{NoRipgrep: true}}}
	if _, err := exec.LookPath("rg"); err == nil {
		backends = append(backends, struct {
			name string
			cfg  tools.Config
		}{"ripgrep", tools.Config{}})
	} else {
		t.Log("rg is not in PATH: only the Go search is tested")
	}
	for _, b := range backends {
		set, ws := newSet(t, b.cfg)
		grepTree(t, ws)
		for _, tt := range grepCases {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				res := call(t, set, "grep", tt.args)
				if res.Err != "" || res.Output != tt.want {
					t.Errorf("got %q (err %q)\nwant %q", res.Output, res.Err, tt.want)
				}
			})
		}
	}
}

func TestGrepErrors(t *testing.T) {
	set, _ := newSet(t, tools.Config{})
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `missing required argument "pattern"`},
		{map[string]any{"pattern": "("}, ""}, // literal: fine
		{map[string]any{"pattern": "(", "regex": true}, "invalid regular expression"},
		{map[string]any{"pattern": "a\nb"}, "must not contain a line break"},
		{map[string]any{"pattern": "a", "mode": "lines"}, "mode must be"},
		{map[string]any{"pattern": "a", "max_results": 0}, "max_results must be"},
		{map[string]any{"pattern": "a", "path": "../"}, "outside the workspace"},
		{map[string]any{"pattern": "a", "path": "nope"}, "nope does not exist"},
	}
	for _, tt := range tests {
		res := call(t, set, "grep", tt.args)
		if tt.want == "" && res.Err != "" || !strings.Contains(res.Err, tt.want) {
			t.Errorf("grep %v: Err = %q, want %q", tt.args, res.Err, tt.want)
		}
	}
}

// TestGrepBackendsAgree compares both searches on a larger generated tree.
func TestGrepBackendsAgree(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not in PATH")
	}
	goSet, ws := newSet(t, tools.Config{NoRipgrep: true})
	rgSet := tools.New(tools.Config{Workspace: ws, OutputDir: t.TempDir()})
	defer rgSet.Close()
	for i := range 300 {
		var b strings.Builder
		for j := range 20 {
			fmt.Fprintf(&b, "line %d of file %d: token%d %s\n", j, i, (i*j)%17, strings.Repeat("x", j))
		}
		writeFile(t, filepath.Join(ws, fmt.Sprintf("d%d/s%d/f%d.txt", i%7, i%3, i)), b.String(), 0o644)
	}
	for _, args := range []map[string]any{
		{"pattern": "token5 ", "mode": "content", "max_results": 2000},
		{"pattern": "TOKEN1[0-3]", "regex": true, "ignore_case": true, "mode": "count", "max_results": 2000},
		{"pattern": "x{19}", "regex": true, "glob": "d3/**", "max_results": 2000},
	} {
		a, b := call(t, goSet, "grep", args), call(t, rgSet, "grep", args)
		if a.Output != b.Output || a.Err != b.Err {
			t.Errorf("grep %v: go and rg differ:\n%.300q\n%.300q", args, a.Output, b.Output)
		}
	}
}

// BenchmarkGrep50k searches a 50,000-file tree with rg itself, the grep
// tool on rg, and the grep tool's Go search.
func BenchmarkGrep50k(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not in PATH")
	}
	ws := b.TempDir()
	for i := range 50000 {
		p := filepath.Join(ws, fmt.Sprintf("d%d/e%d/f%d.txt", i%50, i%20, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		body := fmt.Sprintf("file %d\nsome text %d\nneedle%d\n", i, i*7, i%1000)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	args := json.RawMessage(`{"pattern":"needle7","mode":"count","max_results":2000}`)
	b.Run("rg", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(rg, "--count", "--hidden", "--no-ignore", "needle7", ws).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		cfg  tools.Config
	}{{"tool-rg", tools.Config{}}, {"tool-go", tools.Config{NoRipgrep: true}}} {
		set := tools.New(tools.Config{Workspace: ws, NoRipgrep: c.cfg.NoRipgrep, OutputDir: b.TempDir()})
		tool, _ := set.Lookup("grep")
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if res := tool.Run(context.Background(), tools.Call{Args: args}); res.Err != "" {
					b.Fatal(res.Err)
				}
			}
		})
		set.Close()
	}
}
