package llmproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/testutil"
)

const testKey = "sk-test-SECRET-0123456789"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a fake OpenAI-compatible server. It rejects requests without
// the key and streams scripted chunks, waiting on release between them.
type upstream struct {
	*httptest.Server
	release chan struct{} // one receive per chunk after the first
	mu      sync.Mutex
	seen    []*http.Request
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Clone(context.Background()))
	u.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+testKey {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/base/v1/models":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m1"}]}`)
	case "/base/v1/chat/completions":
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			if i > 0 {
				select {
				case <-u.release:
				case <-r.Context().Done():
					return
				case <-time.After(5 * time.Second):
					return
				}
			}
			fmt.Fprintf(w, "data: {\"chunk\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...)
}

func newProxy(t *testing.T, upstreamURL string, logs io.Writer) *llmproxy.Proxy {
	t.Helper()
	p, err := llmproxy.New(llmproxy.Config{
		Upstream: upstreamURL,
		APIKey:   testKey,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("new proxy: %v", err)
	}
	return p
}

func TestStreamsChunksBeforeUpstreamFinishes(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	var logs testutil.Buffer
	front := httptest.NewServer(newProxy(t, up.URL+"/base/v1", &logs))
	defer front.Close()

	req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set("Authorization", "Bearer sandbox-made-this-up")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				lines <- sc.Text()
			}
		}
	}()
	for i := range 3 {
		// The upstream holds chunk i+1 until released, so receiving chunk i
		// here proves it was not buffered.
		select {
		case got := <-lines:
			if want := fmt.Sprintf(`data: {"chunk":%d}`, i); got != want {
				t.Fatalf("line %d = %q, want %q", i, got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %d did not arrive while upstream was still streaming", i)
		}
		if i < 2 {
			select {
			case up.release <- struct{}{}:
			case <-time.After(5 * time.Second):
				t.Fatalf("upstream stopped waiting after chunk %d", i)
			}
		}
	}
	select {
	case got := <-lines:
		if got != "data: [DONE]" {
			t.Fatalf("last line %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no [DONE]")
	}
	reqs := up.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("upstream saw %d requests, auth %q", len(reqs), reqs[0].Header.Get("Authorization"))
	}
	if strings.Contains(logs.String(), testKey) {
		t.Fatalf("key in logs:\n%s", logs.String())
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	var logs testutil.Buffer
	front := httptest.NewServer(newProxy(t, up.URL+"/base/v1/", &logs))
	defer front.Close()

	tests := []struct {
		method, path string
		status       int
		contains     string
	}{
		{http.MethodGet, "/v1/models", http.StatusOK, `"m1"`},
		{http.MethodGet, "/v1/models?limit=1", http.StatusOK, `"m1"`},
		{http.MethodPost, "/v1/embeddings", http.StatusNotFound, `"error"`},
		{http.MethodGet, "/v1/chat/completions", http.StatusNotFound, `"error"`},
		{http.MethodGet, "/admin", http.StatusNotFound, `"message"`},
	}
	for _, tc := range tests {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, front.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.contains) {
				t.Fatalf("got %d %s, want %d containing %s", resp.StatusCode, body, tc.status, tc.contains)
			}
		})
	}
	if n := len(up.requests()); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (rejected routes must not be forwarded)", n)
	}
}

// apiErr decodes an OpenAI-style error body.
func apiErr(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not an OpenAI error body: %s (%v)", body, err)
	}
	return e.Error.Message
}

func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	// A port that refuses: listen, note the address, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/v1"
	ln.Close()

	// A server that accepts but never answers in time.
	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(stall)

	tests := []struct {
		name     string
		upstream string
		client   *http.Client
		status   int
	}{
		{"refused", refused, nil, http.StatusBadGateway},
		{"timeout", slow.URL + "/v1", &http.Client{Timeout: 200 * time.Millisecond}, http.StatusGatewayTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testutil.Buffer
			p, err := llmproxy.New(llmproxy.Config{
				Upstream: tc.upstream, APIKey: testKey, HTTPClient: tc.client,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}"))
			p.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			msg := apiErr(t, rec.Body.Bytes())
			if strings.Contains(rec.Body.String(), testKey) || strings.Contains(logs.String(), testKey) {
				t.Fatalf("key leaked: body %s logs %s", rec.Body, logs.String())
			}
			if !strings.Contains(msg, "upstream") {
				t.Fatalf("message %q does not say what failed", msg)
			}
		})
	}
}

func TestConfigRedactsKey(t *testing.T) {
	t.Parallel()
	cfg := llmproxy.Config{Upstream: "https://api.example/v1", APIKey: testKey}
	var logs testutil.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("config", "llm", cfg)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "llm", cfg)
	for _, s := range []string{logs.String(), cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		if strings.Contains(s, testKey) {
			t.Fatalf("key printed: %s", s)
		}
	}
	if !strings.Contains(logs.String(), "api.example") {
		t.Fatalf("upstream not logged: %s", logs.String())
	}
}

func TestNewRejectsBadUpstream(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "api.openai.com/v1", "ftp://x/v1", "http://"} {
		if _, err := llmproxy.New(llmproxy.Config{Upstream: u}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

func TestServeOnUnixSocket(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	dir, err := os.MkdirTemp("", "llmp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.Buffer
	l := newProxy(t, up.URL+"/base/v1", &logs).Serve(ln)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get("http://boxwire-llm/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "m1") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}
