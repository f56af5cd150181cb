package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

// FuzzPathConfinement feeds arbitrary paths to write_file, read_file, ls
// and delete in a workspace that holds symlinks leading out of it: nothing
// outside may be created, changed or removed, and whatever is accepted must
// land inside the workspace.
func FuzzPathConfinement(f *testing.F) {
	for _, seed := range []string{
		"a.txt", "../x", "dir/../../x", "/etc/passwd", "out/secret", "out/new", "rel-out/../x",
		"in/../f", ".", "..", "/", "a/./b/../c", "out", "rel-out", "dir/link-up/x", "//x", "a\x00b",
	} {
		f.Add(seed)
	}
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{"out": outside, "rel-out": "../outside", "dir/link-up": ".."} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			f.Fatal(err)
		}
	}
	set := tools.New(tools.Config{Workspace: ws, OutputDir: filepath.Join(base, "output")})
	f.Cleanup(func() { _ = set.Close() })
	f.Fuzz(func(t *testing.T, path string) {
		for _, name := range []string{"write_file", "read_file", "ls", "delete"} {
			res := call(t, set, name, map[string]any{"path": path, "content": "fuzz", "recursive": false})
			if res.Err == "" && strings.Contains(res.Output, "secret") {
				t.Fatalf("%s(%q) read outside the workspace: %q", name, path, res.Output)
			}
		}
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 1 || entries[0].Name() != "secret" {
			t.Fatalf("path %q changed the outside directory: %v %v", path, entries, err)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
			t.Fatalf("path %q changed the outside file", path)
		}
		if _, err := os.Stat(ws); err != nil {
			t.Fatalf("path %q removed the workspace", path)
		}
		// Restore the links if delete removed one.
		for name, target := range map[string]string{"out": outside, "rel-out": "../outside", "dir/link-up": ".."} {
			_ = os.MkdirAll(filepath.Join(ws, "dir"), 0o755)
			_ = os.Symlink(target, filepath.Join(ws, name))
		}
	})
}

// FuzzReplace checks edit_file's core: a successful edit replaces exactly
// the occurrences of old, and a refusal leaves the content alone.
func FuzzReplace(f *testing.F) {
	f.Add("hello world", "world", "there", false)
	f.Add("aaaa", "aa", "b", true)
	f.Add("aaaa", "aa", "b", false)
	f.Add("line1\nline2  \n", "line2\n", "x", false)
	f.Add("x", "", "y", false)
	f.Add("é€", "€", "", false)
	f.Add("abc", "abc", "abc", true)
	f.Fuzz(func(t *testing.T, content, old, new string, all bool) {
		out, n, msg := tools.Replace(content, old, new, all)
		count := 0
		if old != "" {
			count = strings.Count(content, old)
		}
		switch {
		case msg != "":
			if out != content || n != 0 {
				t.Fatalf("refused (%s) but changed the content", msg)
			}
			if old != "" && old != new && count == 1 {
				t.Fatalf("refused a unique match: %s", msg)
			}
			if old != "" && old != new && count > 1 && all {
				t.Fatalf("refused replace_all: %s", msg)
			}
		case old == "" || old == new:
			t.Fatalf("accepted old=%q new=%q", old, new)
		case n != count || (!all && n != 1):
			t.Fatalf("replaced %d, content has %d", n, count)
		case out != strings.ReplaceAll(content, old, new):
			t.Fatalf("wrong result %q", out)
		}
	})
}
