package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait in these tests.
const waitTimeout = 5 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to srv and closes the connection at the end of the test.
func dial(t *testing.T, cfg chat.Config) *chat.Conn {
	t.Helper()
	c, err := chat.Dial(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next returns the next message on Events, failing after waitTimeout.
func next(t *testing.T, c *chat.Conn) (wire.Envelope, bool) {
	t.Helper()
	select {
	case env, ok := <-c.Events():
		return env, ok
	case <-time.After(waitTimeout):
		t.Fatal("no event within deadline")
		return wire.Envelope{}, false
	}
}

// turn is a scripted turn with text, a tool call with streamed output, and
// usage.
func turn(text string) []wire.Envelope {
	exit := 0
	return []wire.Envelope{
		wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "run"}),
		wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "ning"}),
		wire.MustNew(wire.TypeAssistantMessage, "", "", wire.Text{Text: "running"}),
		wire.MustNew(wire.TypeToolCall, "", "", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: []byte(`{"command":"echo ` + text + `"}`)}),
		wire.MustNew(wire.TypeToolOutput, "", "", wire.ToolOutput{CallID: "c1", Output: text + "\r\n"}),
		wire.MustNew(wire.TypeToolResult, "", "", wire.ToolResult{CallID: "c1", Name: "execute", ExitCode: &exit, Output: text + "\n"}),
		wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop, Usage: &wire.Usage{TotalTokens: 42}}),
	}
}

func TestDialHandshake(t *testing.T) {
	t.Parallel()
	hellos := make(chan wire.Hello, 1)
	srv := chattest.New(t, chattest.Options{Token: "s3cret", Handler: func(p *chattest.Peer) {
		h, err := p.Handshake("t_abc")
		if err == nil {
			hellos <- h
		}
		_, _ = p.Recv()
	}})
	c := dial(t, chat.Config{URL: srv.URL, Token: "s3cret", Thread: "t_abc", AfterSeq: 9})
	if c.Thread() != "t_abc" {
		t.Errorf("Thread() = %q, want t_abc", c.Thread())
	}
	if c.LastSeq() != 9 {
		t.Errorf("LastSeq() = %d before any event, want AfterSeq 9", c.LastSeq())
	}
	if got := c.Server().Software; got != "chattest" {
		t.Errorf("Server().Software = %q", got)
	}
	select {
	case h := <-hellos:
		want := wire.Hello{Version: wire.Version, Role: wire.RoleClient, Software: chat.Software, Thread: "t_abc", AfterSeq: 9}
		if h != want {
			t.Errorf("client hello = %+v, want %+v", h, want)
		}
	case <-time.After(waitTimeout):
		t.Fatal("server saw no hello")
	}
}

func TestDialUnauthorized(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Token: "s3cret", Handler: func(p *chattest.Peer) {
		t.Error("handler reached without the token")
	}})
	for _, token := range []string{"", "hunter2"} {
		_, err := chat.Dial(testCtx(t), chat.Config{URL: srv.URL, Token: token})
		if !errors.Is(err, chat.ErrUnauthorized) {
			t.Fatalf("token %q: err = %v, want ErrUnauthorized", token, err)
		}
		var werr wire.Error
		if !errors.As(err, &werr) || werr.Code != wire.CodeUnauthorized {
			t.Errorf("token %q: err = %v, want a wire.Error unauthorized inside", token, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the token", err)
		}
	}
}

func TestDialErrorInsteadOfHello(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Recv(); err != nil {
			return
		}
		_ = p.Send(wire.ErrorEnvelope("", "", wire.CodeNotFound, "no thread t_gone"))
		_, _ = p.Recv()
	}})
	_, err := chat.Dial(testCtx(t), chat.Config{URL: srv.URL, Thread: "t_gone"})
	var werr wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeNotFound {
		t.Fatalf("err = %v, want a wire.Error not_found", err)
	}
}

func TestDialBoundedByContext(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		_, _ = p.Recv() // the hello, never answered
		_, _ = p.Recv()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := chat.Dial(ctx, chat.Config{URL: srv.URL})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	// Only a hang guard: without ctx, Dial would wait handshakeTimeout (30s).
	if d := time.Since(start); d > waitTimeout {
		t.Errorf("Dial took %v after a 200ms deadline", d)
	}
}

func TestURLForms(t *testing.T) {
	t.Parallel()
	tcp := chattest.New(t, chattest.Options{Handler: chattest.Scripted("t_tcp", turn)})
	unix := chattest.New(t, chattest.Options{Unix: true, Handler: chattest.Scripted("t_unix", turn)})
	hostport := strings.TrimSuffix(strings.TrimPrefix(tcp.URL, "ws://"), wire.Path)
	tests := []struct{ name, url, thread string }{
		{"ws", tcp.URL, "t_tcp"},
		{"ws without path", "ws://" + hostport, "t_tcp"},
		{"http", "http://" + hostport + "/", "t_tcp"},
		{"bare host:port", hostport, "t_tcp"},
		{"unix socket", unix.URL, "t_unix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, chat.Config{URL: tt.url})
			if c.Thread() != tt.thread {
				t.Errorf("Thread() = %q, want %q", c.Thread(), tt.thread)
			}
		})
	}
	if _, err := chat.Dial(testCtx(t), chat.Config{URL: "ftp://" + hostport}); err == nil {
		t.Error("ftp:// URL accepted")
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", turn)})
	c := dial(t, chat.Config{URL: srv.URL})
	for range 3 {
		rtt, err := c.Ping(testCtx(t))
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		if rtt <= 0 || rtt > waitTimeout {
			t.Errorf("rtt = %v", rtt)
		}
	}
	select {
	case env := <-c.Events():
		t.Errorf("Events delivered %s; pongs must not be delivered", env.Type)
	default:
	}
}

func TestPingConcurrent(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", turn)})
	c := dial(t, chat.Config{URL: srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Ping(testCtx(t)); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
	wg.Wait()
}
