package loop_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

// flakySocket serves an OpenAI-compatible handler on a unix socket, as
// the bridge's LLM proxy does, after dropping the first drops connections
// without a byte (a bridge going down with the request in flight).
type flakySocket struct {
	path  string
	drops int32
	seen  atomic.Int32 // connections accepted
	srv   *http.Server
	ln    net.Listener
}

func newFlakySocket(t *testing.T, drops int32, h http.Handler) *flakySocket {
	t.Helper()
	f := &flakySocket{path: filepath.Join(t.TempDir(), "llm.sock"), drops: drops, srv: &http.Server{Handler: h}}
	t.Cleanup(func() {
		if f.ln != nil {
			_ = f.srv.Close()
		}
	})
	return f
}

// listen starts accepting; until then dials fail (the socket is absent).
func (f *flakySocket) listen(t *testing.T) {
	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Errorf("listen: %v", err)
		return
	}
	f.ln = ln
	go func() { _ = f.srv.Serve(dropFirst{Listener: ln, f: f}) }() // ends with srv.Close
}

// dropFirst closes the first f.drops accepted connections at once.
type dropFirst struct {
	net.Listener
	f *flakySocket
}

func (d dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := d.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if d.f.seen.Add(1) <= d.f.drops {
			c.Close()
			continue
		}
		return c, nil
	}
}

func retryLoop(f *flakySocket, retryFor time.Duration) *loop.Loop {
	m := loop.NewOpenAI(loop.OpenAIConfig{BaseURL: "http://boxwire-llm/v1", APIKey: testKey, HTTPClient: loop.UnixSocketClient(f.path)})
	return loop.New(loop.Config{Model: m, RetryFor: retryFor})
}

func answerScript() llmscript.Script {
	return llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{{Content: "fine, thanks"}}}}}
}

// A model call whose connection is closed before any answer byte (twice),
// and one made while the socket is missing (a bridge restart), are made
// again: the turn ends normally with the answer streamed once.
func TestModelCallRetriedAcrossBridgeRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drops int32
		late  time.Duration // the socket appears after this
	}{
		{"connection dropped", 2, 0},
		{"socket missing for 300ms", 0, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmscript.New(answerScript(), llmscript.Options{APIKey: testKey})
			f := newFlakySocket(t, tc.drops, srv)
			if tc.late == 0 {
				f.listen(t)
			} else {
				timer := time.AfterFunc(tc.late, func() { f.listen(t) })
				t.Cleanup(func() { timer.Stop() })
			}
			rec := &recorder{}
			conv := &loop.Conversation{}
			td := runTurn(t, testCtx(t), retryLoop(f, 0), conv, "how are you", rec)
			if td.Reason != wire.ReasonStop {
				t.Fatalf("turn ended %q: %v %s", td.Reason, rec.types(), rec.first(t, wire.TypeError).Data)
			}
			want := []wire.Type{wire.TypeAssistantDelta, wire.TypeAssistantMessage, wire.TypeTurnDone}
			if got := slices.Compact(rec.types()); !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("the endpoint answered %d requests, want 1", n)
			}
		})
	}
}

// midStream streams one fragment of text and then drops the connection.
type midStream struct{ calls atomic.Int32 }

func (m *midStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"half an ans"}}]}`+"\n\n")
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// A call that fails after text reached the user is not made again: the
// turn ends with llm_error, the fragment is not repeated.
func TestModelCallNotRetriedAfterContent(t *testing.T) {
	h := &midStream{}
	f := newFlakySocket(t, 0, h)
	f.listen(t)
	rec := &recorder{}
	td := runTurn(t, testCtx(t), retryLoop(f, 0), &loop.Conversation{}, "hi", rec)
	if td.Reason != wire.ReasonError || h.calls.Load() != 1 {
		t.Fatalf("turn ended %q after %d calls; want error after 1", td.Reason, h.calls.Load())
	}
	if got := decode[wire.Error](t, rec.first(t, wire.TypeError)); got.Code != wire.CodeLLM {
		t.Errorf("error %+v, want llm_error", got)
	}
}

// Retries are bounded: with no endpoint at all the turn fails after about
// RetryFor, not later.
func TestModelCallRetriesAreBounded(t *testing.T) {
	f := newFlakySocket(t, 0, http.NotFoundHandler()) // never listens
	start := time.Now()
	td := runTurn(t, testCtx(t), retryLoop(f, 700*time.Millisecond), &loop.Conversation{}, "hi", &recorder{})
	if took := time.Since(start); td.Reason != wire.ReasonError || took > 5*time.Second {
		t.Fatalf("turn ended %q after %s; want error within the bound", td.Reason, took)
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("post: %w", syscall.ENOENT), true},
		{&loop.EndpointError{Message: "unexpected EOF", Err: io.ErrUnexpectedEOF}, true},
		{&loop.EndpointError{StatusCode: 502, Message: "bad gateway", Err: errors.New("502")}, false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := loop.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
