package files_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/files"
	"github.com/boxwire/boxwire/bridge/wire"
)

// entry is one tar entry to upload.
type entry struct {
	name, body, link string
	typ              byte
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setup returns a workspace with a sibling "outside" folder and a server.
func setup(t *testing.T) (ws, outside string, srv *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	ws, outside = filepath.Join(dir, "workspace"), filepath.Join(dir, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(files.New(files.Config{Workspace: ws, MaxFileBytes: 100}))
	t.Cleanup(srv.Close)
	return ws, outside, srv
}

func do(t *testing.T, method, url, ctype string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestUploadTarPerFileResults(t *testing.T) {
	ws, outside, srv := setup(t)
	body := tarOf(t,
		entry{name: "proj/", typ: tar.TypeDir},
		entry{name: "proj/a.txt", body: "hello"},
		entry{name: "proj/big", body: strings.Repeat("x", 101)},
		entry{name: "../evil", body: "x"},
		entry{name: "/abs", body: "x"},
		entry{name: "proj/link", typ: tar.TypeSymlink, link: "a.txt"},
		entry{name: "proj/badlink", typ: tar.TypeSymlink, link: "../../../x"},
		entry{name: "escape/planted", body: "x"},
		entry{name: "proj", body: "not a dir"},
		entry{name: "proj/hard", typ: tar.TypeLink, link: "proj/a.txt"},
	)
	resp := do(t, http.MethodPut, srv.URL+wire.FilesPath+"?path=dest", wire.ContentTypeTar, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var res wire.TransferResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	want := map[string]wire.Code{
		"dest/proj": wire.CodeIsDirectory /* the later file entry */, "dest/proj/a.txt": "", "dest/proj/big": wire.CodeTooLarge,
		"../evil": wire.CodeInvalidPath, "/abs": wire.CodeInvalidPath, "dest/proj/link": "",
		"dest/proj/badlink": wire.CodeInvalidPath, "dest/escape/planted": "", "dest/proj/hard": wire.CodeInvalidPath,
	}
	got := map[string]wire.Code{}
	for _, f := range res.Files {
		got[f.Path] = f.Code
	}
	for p, code := range want {
		if c, ok := got[p]; !ok || c != code {
			t.Errorf("%s: code %q (present %v), want %q", p, c, ok, code)
		}
	}
	if data, err := os.ReadFile(filepath.Join(ws, "dest/proj/a.txt")); err != nil || string(data) != "hello" {
		t.Errorf("a.txt = %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("an upload wrote outside the workspace")
	}
}

func TestUploadThroughLinkOutside(t *testing.T) {
	_, outside, srv := setup(t)
	resp := do(t, http.MethodPut, srv.URL+wire.FilesPath+"?path=escape/x", wire.ContentTypeRaw, []byte("x"))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("wrote through a link out of the workspace")
	}
}

func TestRequestErrors(t *testing.T) {
	ws, _, srv := setup(t)
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "locked"), []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, query, ctype string
		body                       []byte
		status                     int
		code                       wire.Code
	}{
		{"missing file", "GET", "path=nope", "", nil, 404, wire.CodeFileNotFound},
		{"dotdot", "GET", "path=../x", "", nil, 400, wire.CodeInvalidPath},
		{"absolute outside", "GET", "path=/etc/passwd", "", nil, 400, wire.CodeInvalidPath},
		{"link outside", "GET", "path=escape/secret", "", nil, 400, wire.CodeInvalidPath},
		{"raw directory", "GET", "path=dir&format=raw", "", nil, 409, wire.CodeIsDirectory},
		{"raw upload onto directory", "PUT", "path=dir", wire.ContentTypeRaw, []byte("x"), 409, wire.CodeIsDirectory},
		{"raw upload too large", "PUT", "path=f", wire.ContentTypeRaw, bytes.Repeat([]byte("x"), 101), 413, wire.CodeTooLarge},
		{"not a tar", "PUT", "path=d", wire.ContentTypeTar, []byte("garbage garbage"), 400, wire.CodeBadMessage},
	}
	if os.Geteuid() != 0 {
		tests = append(tests, struct {
			name, method, query, ctype string
			body                       []byte
			status                     int
			code                       wire.Code
		}{"unreadable", "GET", "path=locked&format=raw", "", nil, 403, wire.CodePermissionDenied})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, tt.method, srv.URL+wire.FilesPath+"?"+tt.query, tt.ctype, tt.body)
			var body struct{ Error wire.Error }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tt.status || body.Error.Code != tt.code {
				t.Fatalf("got %d %q (%s), want %d %q", resp.StatusCode, body.Error.Code, body.Error.Message, tt.status, tt.code)
			}
		})
	}
}

func TestDownloadTarRoundTrip(t *testing.T) {
	ws, _, srv := setup(t)
	body := tarOf(t, entry{name: "p/a", body: "A"}, entry{name: "p/sub/b", body: "BB"}, entry{name: "p/l", typ: tar.TypeSymlink, link: "a"})
	if resp := do(t, http.MethodPut, srv.URL+wire.FilesPath, wire.ContentTypeTar, body); resp.StatusCode != 200 {
		t.Fatalf("upload status %d", resp.StatusCode)
	}
	_ = ws
	resp := do(t, http.MethodGet, srv.URL+wire.FilesPath+"?path=p", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	tr := tar.NewReader(resp.Body)
	got := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[hdr.Name] = string(hdr.Typeflag) + ":" + string(data) + hdr.Linkname
	}
	want := map[string]string{"p/": "5:", "p/a": "0:A", "p/l": "2:a", "p/sub/": "5:", "p/sub/b": "0:BB"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	var res wire.TransferResult
	if err := json.Unmarshal([]byte(resp.Trailer.Get(wire.ResultsTrailer)), &res); err != nil {
		t.Fatalf("trailer %q: %v", resp.Trailer.Get(wire.ResultsTrailer), err)
	}
	if res.Count != 3 || res.Bytes != 3 || res.Failed != 0 || len(res.Files) != 0 {
		t.Errorf("result %+v", res)
	}
}
