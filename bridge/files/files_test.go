package files_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/files"
	"github.com/boxwire/boxwire/bridge/wire"
)

// agent serves a fake agent's files route on a unix socket and returns
// how to dial it; each request's path, Authorization and body length are
// echoed back.
func agent(t *testing.T) func(context.Context) (net.Conn, error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return // the proxy cut an upload over the limit
		}
		_, _ = io.WriteString(w, r.URL.Path+" auth="+r.Header.Get("Authorization")+" q="+r.URL.RawQuery+" n="+strconv.FormatInt(n, 10))
	})}}
	hs.Start()
	t.Cleanup(hs.Close)
	return func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
}

func serve(p files.Proxy, method, body string, length int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://bridge"+"/v1/threads/t_1/files"+"?path=a.txt", strings.NewReader(body))
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer secret")
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	return rec
}

// TestProxy: a request reaches the agent at its files path, without the
// bridge's credentials; an upload over the limit is refused with 413,
// whether its length says so or it only turns out so; an agent that
// cannot be reached is 502.
func TestProxy(t *testing.T) {
	t.Parallel()
	p := files.Proxy{Dial: agent(t), Limit: 10, Log: slog.New(slog.DiscardHandler)}
	rec := serve(p, http.MethodPut, "hello", 5)
	if rec.Code != http.StatusOK || rec.Body.String() != wire.FilesPath+" auth= q=path=a.txt n=5" {
		t.Fatalf("upload: %d %q", rec.Code, rec.Body)
	}
	if rec := serve(p, http.MethodPut, strings.Repeat("x", 11), 11); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "too_large") {
		t.Fatalf("upload over the limit by its length: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(p, http.MethodPut, strings.Repeat("x", 100), -1); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("upload over the limit as it streams: %d %s", rec.Code, rec.Body)
	}
	down := files.Proxy{Dial: func(context.Context) (net.Conn, error) { return nil, errors.New("no agent") }, Log: slog.New(slog.DiscardHandler)}
	if rec := serve(down, http.MethodGet, "", 0); rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "sandbox_unavailable") {
		t.Fatalf("agent gone: %d %s", rec.Code, rec.Body)
	}
}
