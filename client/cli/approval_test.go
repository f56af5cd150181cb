package cli_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
	"github.com/boxwire/boxwire/client/cli"
)

// askFor is a WaitApproval step for request id about `git push`.
func askFor(id string) wire.Envelope {
	return wire.MustNew(chattest.WaitApproval, "", "", wire.ApprovalRequest{
		ApprovalID: id,
		ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: "execute", CallID: "c1",
			Arguments: []byte(`{"command":"git push"}`)},
		Rule:    "git-push",
		Expires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

// approvalTurn asks for each id in turn, then ends.
func approvalTurn(ids ...string) chattest.Script {
	return func(string) []wire.Envelope {
		out := []wire.Envelope{wire.MustNew(wire.TypeToolCall, "", "", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: []byte(`{"command":"git push"}`)})}
		for _, id := range ids {
			out = append(out, askFor(id))
		}
		return append(out,
			wire.MustNew(wire.TypeToolResult, "", "", wire.ToolResult{CallID: "c1", Name: "execute", ExitCode: exit(0), Output: "pushed\n"}),
			wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}),
		)
	}
}

// TestInteractiveApprovalAnswers types each answer at the chat's
// approve? [y/N] prompt and checks what the fake bridge decided.
func TestInteractiveApprovalAnswers(t *testing.T) {
	tests := []struct {
		name  string
		ids   []string // requests the turn makes, in order
		typed []string // lines typed, one per prompt shown
		want  []string // lines the chat shows, in order
	}{
		{"y approves", []string{"ap_1"}, []string{"y"},
			[]string{"✓ approval ap_1: approved by c_test"}},
		{"anything else denies", []string{"ap_1"}, []string{"maybe"},
			[]string{"✗ approval ap_1: denied by c_test — denied by the user"}},
		{"/approve alone approves", []string{"ap_1"}, []string{"/approve"},
			[]string{"approve sent for ap_1", "✓ approval ap_1: approved by c_test"}},
		{"/approve ID approves", []string{"ap_1"}, []string{"/approve ap_1"},
			[]string{"approve sent for ap_1", "✓ approval ap_1: approved by c_test"}},
		{"/deny ID REASON keeps the reason", []string{"ap_1"}, []string{"/deny ap_1 not on friday"},
			[]string{"deny sent for ap_1", "✗ approval ap_1: denied by c_test — not on friday"}},
		{"/deny REASON answers the asked request", []string{"ap_1"}, []string{"/deny too risky"},
			[]string{"deny sent for ap_1", "✗ approval ap_1: denied by c_test — too risky"}},
		{"/deny alone", []string{"ap_1"}, []string{"/deny"},
			[]string{"✗ approval ap_1: denied by c_test — denied by the user"}},
		{"/approve of an id not pending asks again", []string{"ap_1"}, []string{"/approve ap_2", "y"},
			[]string{`✗ no pending approval "ap_2" (pending: ap_1)`, "approve ap_1? [y/N]", "✓ approval ap_1: approved by c_test"}},
		{"/approve with a mistyped id approves nothing", []string{"ap_1"}, []string{"/approve ap1", "n"},
			[]string{`✗ no pending approval "ap1" (pending: ap_1)`, "approve ap_1? [y/N]", "✗ approval ap_1: denied by c_test — denied by the user"}},
		{"/deny with a wrong id denies nothing", []string{"ap_1"}, []string{"/deny ap_9 no", "y"},
			[]string{`✗ no pending approval "ap_9" (pending: ap_1)`, "approve ap_1? [y/N]", "✓ approval ap_1: approved by c_test"}},
		{"an id already decided", []string{"ap_1", "ap_2"}, []string{"y", "/approve ap_1", "/deny ap_2"},
			[]string{"✓ approval ap_1: approved by c_test", `✗ no pending approval "ap_1" (pending: ap_2)`,
				"approve ap_2? [y/N]", "✗ approval ap_2: denied by c_test — denied by the user"}},
		{"two requests", []string{"ap_1", "ap_2"}, []string{"/approve ap_1", "/deny ap_2 no"},
			[]string{"✓ approval ap_1: approved by c_test", "✗ approval ap_2: denied by c_test — no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, typed := startChat(t, "t_ap", approvalTurn(tt.ids...))
			io.WriteString(typed, "push it\n")
			for i, line := range tt.typed {
				c.out.waitForCount(t, "[y/N]", i+1)
				io.WriteString(typed, line+"\n")
			}
			c.out.waitFor(t, "⎿ exit 0\n› ")
			typed.Close()
			if code := c.wait(t); code != cli.ExitOK {
				t.Errorf("exit code %d; stderr: %s", code, c.errs.String())
			}
			out := c.out.String()
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order); got:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(out, "not_found") {
				t.Errorf("an answer the bridge refused was sent:\n%s", out)
			}
			if n := strings.Count(out, "✓ approval") + strings.Count(out, "✗ approval"); n != len(tt.ids) {
				t.Errorf("%d decisions shown, want %d:\n%s", n, len(tt.ids), out)
			}
		})
	}
}

// TestApproveCommandAtPrompt runs /approve and /deny at the chat prompt,
// with no request being asked.
func TestApproveCommandAtPrompt(t *testing.T) {
	c, typed := startChat(t, "t_ap", okTurn)
	io.WriteString(typed, "/approve\n")
	c.out.waitFor(t, "no open approval request (usage: /approve [ID])")
	io.WriteString(typed, "/deny\n")
	c.out.waitFor(t, "no open approval request (usage: /deny [ID])")
	io.WriteString(typed, "/approve ap_1 ap_2\n")
	c.out.waitFor(t, "usage: /approve [ID]\n")
	io.WriteString(typed, "/approve ap_gone\n")
	c.out.waitFor(t, `✗ no pending approval "ap_gone" (none pending)`)
	io.WriteString(typed, "/deny ap_gone because\n")
	c.out.waitForCount(t, `✗ no pending approval "ap_gone" (none pending)`, 2)
	typed.Close()
	if code := c.wait(t); code != cli.ExitOK {
		t.Errorf("exit code %d; stderr: %s", code, c.errs.String())
	}
	if out := c.out.String(); strings.Contains(out, "sent for") || strings.Contains(out, "not_found") {
		t.Errorf("an answer was sent:\n%s", out)
	}
}

// TestApproveWrongIDAtPrompt: at the prompt between turns, a wrong id
// names the request still pending (replayed, expired by this client's
// clock but not yet decided by the bridge); its own id answers it.
func TestApproveWrongIDAtPrompt(t *testing.T) {
	answers := make(chan wire.Envelope, 2)
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Handshake("t_ap"); err != nil {
			return
		}
		req := wire.MustNew(wire.TypeApprovalRequest, "", "", wire.ApprovalRequest{ApprovalID: "ap_old",
			ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalEgress, Host: "pypi.org", Port: 443},
			Expires:        time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)})
		if p.Event(req) != nil {
			return
		}
		for {
			env, err := p.Recv()
			if err != nil {
				return
			}
			answers <- env
		}
	}})
	in, typed := io.Pipe()
	defer typed.Close()
	c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL, Thread: "t_ap"}, In: in})
	c.out.waitFor(t, "› ")
	// The prompt may come before the request: wait until it is shown
	// (and so known, on the same goroutine) before typing.
	c.out.waitFor(t, "· approval_request")
	io.WriteString(typed, "/approve ap_0ld\n")
	c.out.waitFor(t, `✗ no pending approval "ap_0ld" (pending: ap_old)`)
	io.WriteString(typed, "/deny ap_old not now\n")
	c.out.waitFor(t, "deny sent for ap_old")
	env := testutil.RequireReceive(t, "the answer at the bridge", answers, waitTimeout)
	var a wire.ApprovalAnswer
	if env.Type != wire.TypeDeny || env.Decode(&a) != nil || a.ApprovalID != "ap_old" || a.Reason != "not now" {
		t.Errorf("bridge got %s %s, want deny of ap_old", env.Type, env.Data)
	}
	typed.Close()
	if code := c.wait(t); code != cli.ExitOK {
		t.Errorf("exit code %d; stderr: %s", code, c.errs.String())
	}
	select {
	case env := <-answers:
		t.Errorf("bridge also got %s %s", env.Type, env.Data)
	default:
	}
}

// startChat runs the interactive chat against a fake bridge playing
// script on thread and waits for its first prompt; lines written to typed
// are what the user types (closing it is Ctrl-D).
func startChat(t *testing.T, thread string, script chattest.Script) (c *client, typed io.WriteCloser) {
	t.Helper()
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted(thread, script)})
	in, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	c = start(t, cli.Options{Chat: chat.Config{URL: srv.URL}, In: in})
	c.out.waitFor(t, "› ")
	return c, w
}

// waitForCount fails the test unless s appears n times within waitTimeout.
func (o *output) waitForCount(t *testing.T, s string, n int) {
	t.Helper()
	testutil.Until(t, fmt.Sprintf("output containing %q %d times", s, n), waitTimeout, func() error {
		if got := o.String(); strings.Count(got, s) < n {
			return fmt.Errorf("output:\n%s", got)
		}
		return nil
	})
}
