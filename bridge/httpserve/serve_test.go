package httpserve_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/httpserve"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

func TestServeUnixSocket(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "httpserve") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	s := httpserve.Start(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select { // a live request: Stop cuts it
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = io.WriteString(w, "hello")
	}), httpserve.Config{Name: "test server", ReadHeaderTimeout: time.Second})
	defer close(release)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: waitFor}
	resp, err := hc.Get("http://unix/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("body %q", body)
	}
	hang, err := hc.Get("http://unix/hang")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Body.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !s.Wait(waitFor) {
		t.Fatal("serving goroutine did not end")
	}
	if _, err := io.ReadAll(hang.Body); err == nil {
		t.Error("a live request survived Stop")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left: %v", err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}
