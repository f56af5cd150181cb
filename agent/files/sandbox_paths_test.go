package files_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/agent/files"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestSandboxPaths: with sandbox_paths=1 an absolute path may lie in a
// sandbox root besides the workspace; links out of it and other absolute
// paths are still refused, and without the parameter nothing changes.
func TestSandboxPaths(t *testing.T) {
	dir := t.TempDir()
	ws, sbx, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "tmp"), filepath.Join(dir, "outside")
	for _, d := range []string{ws, sbx, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(sbx, "link")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(files.New(files.Config{Workspace: ws, SandboxRoots: []string{sbx}}))
	t.Cleanup(srv.Close)
	url := func(p, extra string) string { return srv.URL + wire.FilesPath + "?format=raw&path=" + p + extra }

	target := filepath.Join(sbx, "new", "f.bin")
	if resp := do(t, http.MethodPut, url(target, ""), wire.ContentTypeRaw, []byte{0, 1, 2}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("upload to %s without sandbox_paths: status %d, want 400", target, resp.StatusCode)
	}
	if resp := do(t, http.MethodPut, url(target, "&sandbox_paths=1"), wire.ContentTypeRaw, []byte{0, 1, 2}); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload to %s: status %d", target, resp.StatusCode)
	}
	resp := do(t, http.MethodGet, url(target, "&sandbox_paths=1"), "", nil)
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(body) != "\x00\x01\x02" {
		t.Fatalf("download %s: status %d, body %q", target, resp.StatusCode, body)
	}
	for _, tt := range []struct {
		path   string
		status int
	}{
		{filepath.Join(sbx, "link"), http.StatusBadRequest},
		{filepath.Join(outside, "secret"), http.StatusBadRequest},
		{filepath.Join(sbx, "..", "outside", "secret"), http.StatusBadRequest},
		{filepath.Join(sbx, "missing"), http.StatusNotFound},
		{filepath.Join(sbx, "new"), http.StatusConflict},
	} {
		if resp := do(t, http.MethodGet, url(tt.path, "&sandbox_paths=1"), "", nil); resp.StatusCode != tt.status {
			t.Errorf("download %s: status %d, want %d", tt.path, resp.StatusCode, tt.status)
		}
	}
}
