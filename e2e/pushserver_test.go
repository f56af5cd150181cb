package e2e_test

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// pushServer is a loopback HTTP or HTTPS server standing in for a git or
// API host: it records every request and answers "pushed PATH".
type pushServer struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []pushReq
}

// pushReq is one request a pushServer received.
type pushReq struct {
	path, auth string
	at         time.Time
}

func newPushServer(t *testing.T, tlsOn bool) *pushServer {
	t.Helper()
	p := &pushServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, pushReq{path: r.URL.Path, auth: r.Header.Get("Authorization"), at: time.Now()})
		p.mu.Unlock()
		fmt.Fprintf(w, "pushed %s\n", r.URL.Path)
	})
	if tlsOn {
		p.srv = httptest.NewTLSServer(h)
	} else {
		p.srv = httptest.NewServer(h)
	}
	t.Cleanup(p.srv.Close)
	return p
}

// hostPort is "127.0.0.1:PORT".
func (p *pushServer) hostPort() string { return p.srv.Listener.Addr().String() }

// got returns the requests to path so far.
func (p *pushServer) got(path string) []pushReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pushReq
	for _, r := range p.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// writeCA writes the TLS server's certificate as a PEM file (the bridge's
// BOXWIRE_EGRESS_ROOTS) and returns its path.
func (p *pushServer) writeCA(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "roots.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proxyPost is a Python program (the image has no curl) that POSTs to
// argv[1] through the sandbox's egress proxy on its own loopback and prints
// the answer and its status. TLS is verified with the default store,
// which SSL_CERT_FILE (set by the agent) points at.
const proxyPost = `import sys, urllib.request as u
p = "http://127.0.0.1:3128"
o = u.build_opener(u.ProxyHandler({"http": p, "https": p}))
try:
    r = o.open(u.Request(sys.argv[1], data=b"data"), timeout=120)
    print(r.read().decode().strip(), "status=%d" % r.status)
except u.HTTPError as e:
    print(e.read().decode().strip(), "status=%d" % e.code)
`

// viaProxy is a shell command that POSTs to url through the sandbox's
// egress proxy (NO_PROXY would send loopback URLs past it).
func viaProxy(url string) string {
	return fmt.Sprintf("env -u NO_PROXY -u no_proxy python3 -c '%s' %s", proxyPost, url)
}
