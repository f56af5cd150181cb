package cli_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
	"github.com/boxwire/boxwire/client/cli"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 5 * time.Second

// output is a concurrency-safe buffer that tests can wait on.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor fails the test unless s appears within waitTimeout.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	o.waitForCount(t, s, 1)
}

// client runs cli.Run in the background; wait returns its exit code.
type client struct {
	out, errs  output
	interrupts chan os.Signal
	code       chan int
}

func start(t *testing.T, o cli.Options) *client {
	t.Helper()
	c := &client{interrupts: make(chan os.Signal, 1), code: make(chan int, 1)}
	o.Out, o.Err, o.Interrupts = &c.out, &c.errs, c.interrupts
	o.DialTimeout = waitTimeout
	go func() { c.code <- cli.Run(context.Background(), o) }()
	return c
}

func (c *client) wait(t *testing.T) int {
	t.Helper()
	return testutil.RequireReceive(t, "Run's exit code", c.code, waitTimeout)
}

func exit(n int) *int { return &n }

func okTurn(text string) []wire.Envelope {
	return []wire.Envelope{
		wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "Running "}),
		wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "it."}),
		wire.MustNew(wire.TypeAssistantMessage, "", "", wire.Text{Text: "Running it."}),
		wire.MustNew(wire.TypeToolCall, "", "", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: []byte(`{"command":"echo ` + text + `"}`)}),
		wire.MustNew(wire.TypeToolOutput, "", "", wire.ToolOutput{CallID: "c1", Output: text + "\r\n"}),
		wire.MustNew(wire.TypeToolResult, "", "", wire.ToolResult{CallID: "c1", Name: "execute", ExitCode: exit(0), Output: text + "\n"}),
		wire.MustNew(wire.TypeAssistantMessage, "", "", wire.Text{Text: "Done."}),
		wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}),
	}
}

func waitingTurn(string) []wire.Envelope {
	return []wire.Envelope{
		wire.MustNew(wire.TypeToolCall, "", "", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: []byte(`{"command":"sleep 100"}`)}),
		wire.MustNew(wire.TypeToolOutput, "", "", wire.ToolOutput{CallID: "c1", Output: "waiting\n"}),
		{Type: chattest.WaitInterrupt},
	}
}

func failingTurn(string) []wire.Envelope {
	return []wire.Envelope{
		wire.ErrorEnvelope("", "", wire.CodeLLM, "model endpoint: 502"),
		wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonError}),
	}
}

func stepLimitTurn(string) []wire.Envelope {
	return []wire.Envelope{wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStepLimit})}
}

func TestOneShotExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		script chattest.Script
		code   int
		want   string
	}{
		{"stop", okTurn, cli.ExitOK, "Running it.\n⏺ execute(echo hi)\n    hi\n  ⎿ exit 0\nDone.\n"},
		{"error", failingTurn, cli.ExitTurnFailed, "✗ error: llm_error: model endpoint: 502\n✗ turn ended: error\n"},
		{"step limit", stepLimitTurn, cli.ExitTurnFailed, "✗ stopped: step limit reached\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chattest.New(t, chattest.Options{Token: "tok", Handler: chattest.Scripted("", tt.script)})
			c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL, Token: "tok"}, Message: "hi"})
			if code := c.wait(t); code != tt.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tt.code, c.errs.String())
			}
			if got := c.out.String(); got != tt.want {
				t.Errorf("output:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

func TestOneShotInterrupted(t *testing.T) {
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", waitingTurn)})
	c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL}, Message: "wait"})
	c.out.waitFor(t, "waiting")
	c.interrupts <- os.Interrupt
	if code := c.wait(t); code != cli.ExitInterrupted {
		t.Errorf("exit code %d, want %d", code, cli.ExitInterrupted)
	}
	if !strings.HasSuffix(c.out.String(), "    waiting\n⏹ interrupted\n") {
		t.Errorf("output:\n%s", c.out.String())
	}
}

func TestOneShotConnectionErrors(t *testing.T) {
	srv := chattest.New(t, chattest.Options{Token: "tok", Handler: chattest.Scripted("", waitingTurn)})
	t.Run("unauthorized", func(t *testing.T) {
		c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL, Token: "nope"}, Message: "hi"})
		if code := c.wait(t); code != cli.ExitUsage {
			t.Errorf("exit code %d, want %d", code, cli.ExitUsage)
		}
		if !strings.Contains(c.errs.String(), "unauthorized") || strings.Contains(c.errs.String(), "nope") {
			t.Errorf("stderr: %s", c.errs.String())
		}
	})
	t.Run("lost mid-turn for good", func(t *testing.T) {
		c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL, Token: "tok"}, Message: "hi", ReconnectTimeout: time.Second})
		c.out.waitFor(t, "waiting")
		srv.Close() // no reconnect can succeed
		if code := c.wait(t); code != cli.ExitUsage {
			t.Errorf("exit code %d, want %d", code, cli.ExitUsage)
		}
		if !strings.Contains(c.errs.String(), "connection lost") {
			t.Errorf("stderr: %s", c.errs.String())
		}
	})
}

func TestInteractive(t *testing.T) {
	c, typed := startChat(t, "t_chat", okTurn)
	io.WriteString(typed, "hello\n")
	c.out.waitFor(t, "Done.\n› ")
	io.WriteString(typed, "  \nagain\n")
	c.out.waitFor(t, "echo again")
	c.out.waitFor(t, "Done.\n› ")
	typed.Close() // Ctrl-D
	if code := c.wait(t); code != cli.ExitOK {
		t.Errorf("exit code %d, want 0; stderr: %s", code, c.errs.String())
	}
	want := "thread t_chat\n› Running it.\n⏺ execute(echo hello)\n    hello\n  ⎿ exit 0\nDone.\n› › Running it.\n⏺ execute(echo again)\n    again\n  ⎿ exit 0\nDone.\n› \n"
	if got := c.out.String(); got != want {
		t.Errorf("output:\n%q\nwant:\n%q", got, want)
	}
}

func TestInteractiveInterrupts(t *testing.T) {
	c, typed := startChat(t, "", waitingTurn)
	io.WriteString(typed, "long job\n")
	c.out.waitFor(t, "waiting")
	c.interrupts <- os.Interrupt // during the turn: interrupts it
	c.out.waitFor(t, "⏹ interrupted\n› ")
	c.interrupts <- os.Interrupt // at the prompt: leaves
	if code := c.wait(t); code != cli.ExitInterrupted {
		t.Errorf("exit code %d, want %d", code, cli.ExitInterrupted)
	}
}

func TestInteractiveRendersHistory(t *testing.T) {
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		h, err := p.Handshake("t_old")
		if err != nil || h.Thread != "t_old" || h.AfterSeq != 0 {
			t.Errorf("hello %+v, %v", h, err)
			return
		}
		for _, env := range []wire.Envelope{
			wire.MustNew(wire.TypeUserEcho, "", "m-1", wire.UserMessage{Text: "earlier question"}),
			wire.MustNew(wire.TypeAssistantMessage, "", "m-1", wire.Text{Text: "earlier answer"}),
			wire.MustNew(wire.TypeTurnDone, "", "m-1", wire.TurnDone{Reason: wire.ReasonStop}),
		} {
			if p.Event(env) != nil {
				return
			}
		}
		_, _ = p.Recv()
	}})
	in, typed := io.Pipe()
	defer typed.Close()
	c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL, Thread: "t_old"}, In: in})
	c.out.waitFor(t, "earlier answer\n› ")
	typed.Close()
	if code := c.wait(t); code != cli.ExitOK {
		t.Errorf("exit code %d", code)
	}
	want := "thread t_old\n› \n› earlier question\nearlier answer\n› \n"
	if got := c.out.String(); got != want {
		t.Errorf("output:\n%q\nwant:\n%q", got, want)
	}
}
