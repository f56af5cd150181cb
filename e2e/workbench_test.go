package e2e_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The image is a workbench: pip installs, as the sandbox user, a package
// from a package index on the host's loopback (allowed through the egress
// proxy by an IP-literal rule) into HOME on the workspace; the package and
// its script survive a sandbox replacement. And the shell remembers: a cd
// and an export carry to the next run_tool execute.
func TestWorkbenchPipInstallSurvivesReplacement(t *testing.T) {
	index := serveIndex(t, "bwpkg", "0.1", map[string]string{
		"bwpkg/__init__.py": "VALUE = 'from the local index'\n\ndef main():\n    print('hello from bwpkg')\n",
	})
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_EGRESS_ALLOW=" + index)
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()

	wantOut := func(what string, r wire.ToolResult, code int, parts ...string) {
		t.Helper()
		if exitCode(r) != code {
			t.Fatalf("%s: exit %d, want %d: %+v", what, exitCode(r), code, r)
		}
		for _, p := range parts {
			if !strings.Contains(r.Output, p) {
				t.Fatalf("%s: output lacks %q:\n%s", what, p, r.Output)
			}
		}
	}

	// The shell remembers between run_tool calls (the default).
	wantOut("cd and export", s.sh("cd /tmp && export X=1", 30), 0)
	wantOut("the next call", s.sh("pwd; echo $X", 30), 0, "/tmp\n1\n")

	wantOut("HOME", s.sh(`echo "home=$HOME"; touch ~/.written && echo writable`, 30), 0,
		"home=/workspace/.home\n", "writable\n")
	// NO_PROXY names loopback: emptied, so that pip goes through the proxy
	// (the sandbox's own loopback has no index).
	install := s.sh("NO_PROXY= no_proxy= python3 -m pip install --index-url http://"+index+"/simple bwpkg", 180)
	t.Logf("pip install:\n%s", install.Output)
	wantOut("pip install", install, 0, "Successfully installed bwpkg-0.1")
	if strings.Contains(install.Output, "not on PATH") {
		t.Errorf("pip says its script directory is not on PATH:\n%s", install.Output)
	}
	const use = `cd /workspace && python3 -c 'import bwpkg; print(bwpkg.VALUE, bwpkg.__file__)' && bwpkg-hello`
	wantOut("import", s.sh(use, 60), 0, "from the local index /workspace/.home/.local/lib/python3", "hello from bwpkg")

	killSandbox(t, e.containerOf(thread))
	s.awaitEvent(wire.TypeSandboxReplaced)
	wantOut("import after the replacement", s.sh(use, 60), 0,
		"from the local index /workspace/.home/.local/lib/python3", "hello from bwpkg")
	wantOut("HOME after the replacement", s.sh("ls -a ~", 30), 0, ".written")
}

// serveIndex serves a PEP 503 simple index on the host's loopback holding
// one pure-Python wheel of name and version with files (path → content),
// and returns its host:port.
func serveIndex(t *testing.T, name, version string, files map[string]string) string {
	t.Helper()
	wheelName := fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)
	wheel := buildWheel(t, name, version, files)
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		switch strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple"), "/") {
		case "":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/simple/%s/">%s</a></body></html>`, name, name)
		case name:
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`,
				wheelName, hex.EncodeToString(sum[:]), wheelName)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/files/"+wheelName, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(wheel)
	})
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// buildWheel writes a wheel (PEP 427) by hand: the files, METADATA, WHEEL,
// a console script name-hello → name:main, and the RECORD of them all.
func buildWheel(t *testing.T, name, version string, files map[string]string) []byte {
	t.Helper()
	info := fmt.Sprintf("%s-%s.dist-info/", name, version)
	all := map[string]string{
		info + "METADATA":         fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		info + "WHEEL":            "Wheel-Version: 1.0\nGenerator: boxwire-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		info + "entry_points.txt": fmt.Sprintf("[console_scripts]\n%s-hello = %s:main\n", name, name),
	}
	for p, c := range files {
		all[p] = c
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for p, c := range all {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(c))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(c))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
