package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// treeDigest maps every entry below root to its type and content hash.
func treeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			m[rel] = "link:" + target
			return err
		case d.IsDir():
			m[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			m[rel] = "file:" + hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Upload a folder with the real client (cp), download it back, and find
// it byte-identical, a 50 MiB file and a link included.
func TestFilesRoundTripThroughClient(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()

	src := filepath.Join(t.TempDir(), "proj")
	big := make([]byte, 50<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"README.md": []byte("# hi\n"), "src/main.go": []byte("package main\n"), "data/big.bin": big, "empty": nil}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/main.go", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	url := "--url=" + e.bridge.url
	if out, errOut, code := e.runClient(url, "cp", src, thread+":in"); code != 0 {
		t.Fatalf("upload exit %d:\n%s%s", code, out, errOut)
	}
	id := e.containers(map[string]string{"boxwire.thread": thread})[0].ID
	if got := strings.TrimSpace(dockerExec(t, id, "stat", "-c", "%s", "/workspace/in/proj/data/big.bin")); got != "52428800" {
		t.Fatalf("big.bin in the sandbox has %s bytes", got)
	}
	dst := t.TempDir()
	if out, errOut, code := e.runClient(url, "cp", thread+":in/proj", dst); code != 0 {
		t.Fatalf("download exit %d:\n%s%s", code, out, errOut)
	}
	want, got := treeDigest(t, src), treeDigest(t, filepath.Join(dst, "proj"))
	if len(want) != len(got) {
		t.Errorf("%d entries back, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

// tarBytes builds a tar stream of entries (a Linkname makes a symlink).
func tarBytes(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := h.Uname // the body rides in Uname to keep the table short
		h.Uname = ""
		h.Mode = 0o644
		if h.Linkname != "" {
			h.Typeflag = tar.TypeSymlink
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func codeOf(err error) wire.Code {
	var werr wire.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return ""
}

// Every file error code, through the bridge.
func TestFilesErrorCodes(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	cfg := chat.Config{URL: e.bridge.url, Token: e.token}
	id := e.containers(map[string]string{"boxwire.thread": thread})[0].ID
	dockerExec(t, id, "sh", "-c", "mkdir -p /workspace/dir && echo secret > /workspace/locked && chmod 000 /workspace/locked && ln -s /etc /workspace/etc-link")

	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	downloads := []struct {
		name, path string
		raw        bool
		thread     string
		want       wire.Code
	}{
		{"missing file", "nope.txt", false, thread, wire.CodeFileNotFound},
		{"unreadable file", "locked", true, thread, wire.CodePermissionDenied},
		{"directory as a file", "dir", true, thread, wire.CodeIsDirectory},
		{"dot-dot", "../etc/passwd", false, thread, wire.CodeInvalidPath},
		{"absolute outside", "/etc/passwd", false, thread, wire.CodeInvalidPath},
		{"through a link out", "etc-link/passwd", true, thread, wire.CodeInvalidPath},
		{"no such thread", "x", false, "t_000000000000", wire.CodeNotFound},
	}
	for _, tt := range downloads {
		t.Run("download/"+tt.name, func(t *testing.T) {
			d, err := chat.OpenDownload(ctx, cfg, chat.FileTransfer{Thread: tt.thread, Path: tt.path}, tt.raw)
			if err == nil {
				d.Close()
			}
			if codeOf(err) != tt.want {
				t.Fatalf("err = %v, want code %s", err, tt.want)
			}
		})
	}

	t.Run("upload/too_large", func(t *testing.T) {
		_, err := chat.Upload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "big"}, wire.ContentTypeRaw,
			io.LimitReader(zeros{}, 8<<30+1), 8<<30+1)
		if codeOf(err) != wire.CodeTooLarge {
			t.Fatalf("err = %v, want too_large", err)
		}
	})
	t.Run("upload/per-file codes", func(t *testing.T) {
		body := tarBytes(t,
			tar.Header{Name: "ok.txt", Uname: "fine"},
			tar.Header{Name: "etc-link/planted", Uname: "x"},
			tar.Header{Name: "../escape", Uname: "x"},
			tar.Header{Name: "out", Linkname: "../../etc/shadow"},
			tar.Header{Name: "dir", Uname: "a file where a folder is"},
			tar.Header{Name: "locked", Uname: "overwrite attempt"},
		)
		res, err := chat.Upload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "."}, wire.ContentTypeTar, bytes.NewReader(body), int64(len(body)))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]wire.Code{"ok.txt": "", "etc-link/planted": wire.CodeInvalidPath, "../escape": wire.CodeInvalidPath,
			"out": wire.CodeInvalidPath, "dir": wire.CodeIsDirectory}
		got := map[string]wire.Code{}
		for _, f := range res.Files {
			got[f.Path] = f.Code
		}
		for p, c := range want {
			if got[p] != c {
				t.Errorf("%s: code %q, want %q (all: %+v)", p, got[p], c, res.Files)
			}
		}
		if res.Count < 1 || res.Failed < 4 {
			t.Errorf("count %d failed %d", res.Count, res.Failed)
		}
	})
	t.Run("upload/permission_denied", func(t *testing.T) {
		dockerExec(t, id, "sh", "-c", "mkdir -p /workspace/ro && chmod 555 /workspace/ro")
		_, err := chat.Upload(ctx, cfg, chat.FileTransfer{Thread: thread, Path: "ro/x"}, wire.ContentTypeRaw, strings.NewReader("x"), 1)
		if codeOf(err) != wire.CodePermissionDenied {
			t.Fatalf("err = %v, want permission_denied", err)
		}
	})
	if out := dockerExec(t, id, "sh", "-c", "ls /etc/planted /planted 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("an upload reached outside the workspace: %s", out)
	}
}
