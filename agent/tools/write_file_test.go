package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

func TestWriteFile(t *testing.T) {
	set, ws := newSet(t, tools.Config{})
	script := filepath.Join(ws, "run.sh")
	writeFile(t, script, "old\n", 0o751)
	if err := os.Symlink("run.sh", filepath.Join(ws, "link.sh")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, content string
		file                string // where the content must land
		mode                os.FileMode
		output              string
	}{
		{"new file in new dirs", "a/b/c.txt", "hello", filepath.Join(ws, "a/b/c.txt"), 0o644,
			"created a/b/c.txt (5 bytes written)"},
		{"empty content", "empty", "", filepath.Join(ws, "empty"), 0o644,
			"created empty (0 bytes written)"},
		{"overwrite keeps mode", "run.sh", "#!/bin/sh\n", script, 0o751,
			"overwrote run.sh (10 bytes written)"},
		{"through a link inside", "link.sh", "via link\n", script, 0o751,
			"overwrote run.sh (9 bytes written)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, set, "write_file", map[string]string{"path": tt.path, "content": tt.content})
			if res.Err != "" || res.Output != tt.output {
				t.Fatalf("result = %+v, want output %q", res, tt.output)
			}
			if got := readFile(t, tt.file); got != tt.content {
				t.Errorf("content = %q, want %q", got, tt.content)
			}
			st, err := os.Stat(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tt.mode {
				t.Errorf("mode = %v, want %v", st.Mode().Perm(), tt.mode)
			}
		})
	}
	if st, err := os.Lstat(filepath.Join(ws, "link.sh")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.sh is no longer a symlink: %v %v", st, err)
	}
	if res := call(t, set, "write_file", map[string]string{"path": "a", "content": "x"}); !strings.Contains(res.Err, "is a directory") {
		t.Errorf("directory: Err = %q", res.Err)
	}
	assertNoTempFiles(t, ws)
}

// TestWriteFileAtomic checks that a failed write leaves the old content and
// no temporary file behind: the directory is read-only, so the temporary
// file cannot be created next to the target.
func TestWriteFileAtomic(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: directory permissions do not apply, checking the rename path only")
	}
	set, ws := newSet(t, tools.Config{})
	target := filepath.Join(ws, "ro", "f.txt")
	writeFile(t, target, "original\n", 0o644)

	// Replacing an open file's name leaves the old content readable
	// through the old descriptor: the file was replaced, not rewritten.
	old, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if res := call(t, set, "write_file", map[string]string{"path": "ro/f.txt", "content": "new\n"}); res.Err != "" {
		t.Fatal(res.Err)
	}
	buf := make([]byte, 64)
	n, _ := old.Read(buf)
	if string(buf[:n]) != "original\n" {
		t.Errorf("old descriptor reads %q: the file was written in place", buf[:n])
	}
	if got := readFile(t, target); got != "new\n" {
		t.Errorf("content = %q", got)
	}

	if os.Geteuid() != 0 {
		if err := os.Chmod(filepath.Dir(target), 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Dir(target), 0o755)
		res := call(t, set, "write_file", map[string]string{"path": "ro/f.txt", "content": "newer\n"})
		if res.Err == "" {
			t.Error("write into a read-only directory succeeded")
		}
		if got := readFile(t, target); got != "new\n" {
			t.Errorf("content after failed write = %q", got)
		}
	}
	assertNoTempFiles(t, ws)
}

func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
