package llmscript_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

// serving is a Serve call running in the background.
type serving struct {
	cancel context.CancelFunc
	done   chan error
}

func startServe(t *testing.T, ln net.Listener, h http.Handler) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- llmscript.Serve(ctx, ln, h) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels Serve and waits for it, bounded; it may be called twice.
func (s *serving) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok && err != nil {
			t.Errorf("serve: %v", err)
		}
		if ok {
			close(s.done)
		}
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after cancel")
	}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// clientOf is a model client of the server Serve runs on ln, over hc,
// whose idle connections the test's end closes.
func clientOf(t *testing.T, ln net.Listener, hc *http.Client) *openai.Client {
	t.Cleanup(hc.CloseIdleConnections)
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = llmscript.BaseURL(ln)
	cfg.HTTPClient = hc
	return openai.NewClientWithConfig(cfg)
}

func TestServeUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.sock")
	// Leave a stale socket file behind, as a crashed server would.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	ln, err := llmscript.Listen("unix:" + path)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	if got := llmscript.BaseURL(ln); got != "http://unix/v1" {
		t.Errorf("base URL = %q", got)
	}
	script, err := llmscript.Parse([]byte(`{"turns":[{"steps":[{"content":"over the socket"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, ln, llmscript.New(script, llmscript.Options{}))

	hc := unixClient(path)
	resp, err := clientOf(t, ln, hc).CreateChatCompletion(testutil.Context(t, testTimeout), request(false, user("hi")))
	if err != nil {
		t.Fatalf("create over unix socket: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != "over the socket" {
		t.Errorf("content = %q", got)
	}
	hc.CloseIdleConnections()
	s.stop(t)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after shutdown: %v", err)
	}
}

func TestListenRefusesNonSocketFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ln, err := llmscript.Listen("unix:" + path); err == nil {
		ln.Close()
		t.Fatal("listen over a regular file succeeded")
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "keep me" {
		t.Errorf("regular file changed: %q, %v", data, err)
	}
}

func TestServeShutdownEndsDelayedRequest(t *testing.T) {
	ln, err := llmscript.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := llmscript.BaseURL(ln)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Errorf("base URL = %q", base)
	}
	script, err := llmscript.Parse([]byte(`{"turns":[{"steps":[{"content":"late","delay_ms":60000}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := llmscript.New(script, llmscript.Options{})
	s := startServe(t, ln, srv)

	c, ctx := clientOf(t, ln, &http.Client{Transport: &http.Transport{}}), testutil.Context(t, testTimeout)
	errc := make(chan error, 1)
	go func() {
		_, err := c.CreateChatCompletion(ctx, request(false, user("hi")))
		errc <- err
	}()
	// Wait until the request is in the handler, then shut down.
	deadline := time.Now().Add(testTimeout)
	for len(srv.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("request never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	s.stop(t)
	// Only a hang guard: the delay is a minute, and the machine may be slow.
	if d := time.Since(start); d > testTimeout {
		t.Errorf("shutdown took %v with a delayed request in flight", d)
	}
	select {
	case err := <-errc:
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusServiceUnavailable {
			t.Errorf("delayed request after shutdown: err = %v, want a 503 APIError", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("client still waiting after shutdown")
	}
}

func TestServeShutdownCutsStreamWithError(t *testing.T) {
	ln, err := llmscript.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	script, err := llmscript.Parse([]byte(`{"turns":[{"steps":[{"content":"words that never finish","chunk_delay_ms":60000}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, ln, llmscript.New(script, llmscript.Options{}))
	st, err := clientOf(t, ln, &http.Client{Transport: &http.Transport{}}).CreateChatCompletionStream(testutil.Context(t, testTimeout), request(true, user("hi")))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	s.stop(t)
	_, err = st.Recv()
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "stream ended") {
		t.Errorf("recv after shutdown: err = %v, want the stream-ended APIError", err)
	}
}
