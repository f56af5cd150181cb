package tools_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\tline %d\n", i, i)
	}
	return b.String()
}

func TestReadFilePaging(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	var content strings.Builder
	for i := 1; i <= 450; i++ {
		fmt.Fprintf(&content, "line %d\n", i)
	}
	writeFile(t, filepath.Join(ws, "long.txt"), content.String(), 0o644)
	writeFile(t, filepath.Join(ws, "short.txt"), "a\r\nb\n\nlast without newline", 0o644)

	tests := []struct {
		name   string
		args   map[string]any
		output string
		err    string
	}{
		{"first page", map[string]any{"path": "long.txt"},
			numbered(1, 200) + "\n[long.txt: lines 1-200 of 450; to read on, call read_file with offset=200]", ""},
		{"second page", map[string]any{"path": "long.txt", "offset": 200},
			numbered(201, 400) + "\n[long.txt: lines 201-400 of 450; to read on, call read_file with offset=400]", ""},
		{"last page", map[string]any{"path": "long.txt", "offset": 400},
			numbered(401, 450) + "\n[long.txt: lines 401-450 of 450, end of file]", ""},
		{"limit", map[string]any{"path": "long.txt", "offset": 9, "limit": 3},
			numbered(10, 12) + "\n[long.txt: lines 10-12 of 450; to read on, call read_file with offset=12]", ""},
		{"whole short file", map[string]any{"path": "short.txt"},
			"1\ta\n2\tb\n3\t\n4\tlast without newline\n\n[short.txt: lines 1-4 of 4, end of file]", ""},
		{"past the end", map[string]any{"path": "long.txt", "offset": 450}, "",
			"offset 450 is past the end of long.txt, which has 450 lines"},
		{"missing", map[string]any{"path": "nope.txt"}, "", "nope.txt does not exist"},
		{"directory", map[string]any{"path": "."}, "", ". is a directory, not a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, set, "read_file", tt.args)
			if res.Err != tt.err {
				t.Errorf("Err = %q, want %q", res.Err, tt.err)
			}
			if res.Output != tt.output {
				t.Errorf("Output = %q, want %q", res.Output, tt.output)
			}
		})
	}
}

func TestReadFileSpecialContent(t *testing.T) {
	set, ws := newSet(t, tools.Config{OutputLimit: 1000})
	writeFile(t, filepath.Join(ws, "empty"), "", 0o644)
	writeFile(t, filepath.Join(ws, "bin"), "ELF\x00\x01\x02text", 0o644)
	writeFile(t, filepath.Join(ws, "late-nul"), strings.Repeat("x", 9000)+"\x00", 0o644)
	writeFile(t, filepath.Join(ws, "wide"), strings.Repeat("é", 3000)+"\nnext\n", 0o644)
	writeFile(t, filepath.Join(ws, "many"), strings.Repeat("0123456789\n", 500), 0o644)

	if res := call(t, set, "read_file", map[string]any{"path": "empty"}); res.Err != "" || res.Output != "(empty is empty)" {
		t.Errorf("empty: %+v", res)
	}
	if res := call(t, set, "read_file", map[string]any{"path": "bin"}); !strings.Contains(res.Err, "binary") {
		t.Errorf("binary: Err = %q", res.Err)
	}
	if res := call(t, set, "read_file", map[string]any{"path": "late-nul"}); res.Err != "" {
		t.Errorf("NUL after 8 KiB: Err = %q", res.Err)
	}

	// A line longer than the page is cut on a character boundary, with a
	// note.
	res := call(t, set, "read_file", map[string]any{"path": "wide"})
	if !strings.HasPrefix(res.Output, "1.1\té") || !strings.Contains(res.Output, "[line 1 goes on past this page's 1000 bytes") {
		t.Errorf("long line: %q", res.Output)
	}

	// With room, a long line comes in parts that count as one line.
	big := tools.New(tools.Config{Workspace: ws, OutputDir: t.TempDir()})
	defer big.Close()
	res = call(t, big, "read_file", map[string]any{"path": filepath.Join(ws, "wide"), "limit": 2})
	lines := strings.Split(res.Output, "\n")
	if len(lines) < 4 {
		t.Fatalf("parts: %+v", res)
	}
	var nums []string
	for _, l := range lines[:4] {
		n, text, _ := strings.Cut(l, "\t")
		nums = append(nums, n)
		if n != "2" && (len(text) != 2000 || strings.Trim(text, "é") != "") {
			t.Errorf("part %s is %d bytes", n, len(text))
		}
	}
	if strings.Join(nums, " ") != "1.1 1.2 1.3 2" || !strings.Contains(res.Output, "lines 1-2 of 2, end of file") {
		t.Errorf("parts: %q", res.Output)
	}

	// The page stops at the output limit and says where to go on.
	res = call(t, set, "read_file", map[string]any{"path": "many"})
	if len(res.Output) > 1000+200 {
		t.Errorf("output is %d bytes, limit 1000", len(res.Output))
	}
	if !strings.Contains(res.Output, "of 500; to read on, call read_file with offset=") {
		t.Errorf("no continuation note in %q", res.Output[len(res.Output)-100:])
	}
}

// read_file pages through a command's full output, though it is outside
// the workspace: the Set gives read_file the command tools' output folder.
func TestReadFilePagesCommandOutput(t *testing.T) {
	set, _ := newSet(t, tools.Config{OutputLimit: 1000})
	res := call(t, set, "execute", map[string]any{"command": "seq 1 2000"})
	if !res.Truncated || res.OutputPath == "" {
		t.Fatalf("result = %+v", res)
	}
	page := call(t, set, "read_file", map[string]any{"path": res.OutputPath, "offset": 1990})
	if page.Err != "" || !strings.HasPrefix(page.Output, "1991\t1991\n") || !strings.Contains(page.Output, "of 2000, end of file") {
		t.Errorf("read_file of the output file: %+v", page)
	}
}
