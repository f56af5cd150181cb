package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// session is one client connection.
type session struct {
	t    *testing.T
	conn *chat.Conn
}

// dial opens a client connection to the bridge; thread "" makes a new thread.
func (e *env) dial(thread string) *session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread})
	if err != nil {
		e.t.Fatalf("dial bridge: %v\nbridge log:\n%s", err, e.bridge.logText())
	}
	e.t.Cleanup(func() { conn.Close() })
	return &session{t: e.t, conn: conn}
}

// turn sends text and collects the turn's events until turn_done.
func (s *session) turn(text string) (events []wire.Envelope, done wire.TurnDone) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	done, err := s.conn.Run(ctx, text, func(ev wire.Envelope) { events = append(events, ev) })
	if err != nil {
		s.t.Fatalf("turn %q: %v (events so far: %d)", text, err, len(events))
	}
	return events, done
}

// awaitEvent waits for the next event of type typ, skipping others.
func (s *session) awaitEvent(typ wire.Type) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				s.t.Fatalf("connection ended while waiting for %s: %v", typ, s.conn.Err())
			}
			if ev.Type == typ {
				return ev
			}
		case <-timer.C:
			s.t.Fatalf("no %s event within %v", typ, eventTimeout)
		}
	}
}

// awaitAny returns the next event, failing the test after wait.
func (s *session) awaitAny(wait time.Duration) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case ev, ok := <-s.conn.Events():
		if !ok {
			s.t.Fatalf("connection ended: %v", s.conn.Err())
		}
		return ev
	case <-timer.C:
		s.t.Fatalf("no event within %v", wait)
	}
	return wire.Envelope{}
}

// answerFunc decides an approval request: TypeApprove, TypeDeny, or ""
// to leave it unanswered.
type answerFunc func(req wire.ApprovalRequest) wire.Type

// turnAnswering sends text and collects every event until the turn's
// turn_done (approval events carry no request id, so chat.Conn.Run would
// skip them), answering each approval_request with answer.
func (s *session) turnAnswering(text string, answer answerFunc) []wire.Envelope {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	id, err := s.conn.SendMessage(ctx, text)
	if err != nil {
		s.t.Fatalf("send %q: %v", text, err)
	}
	var events []wire.Envelope
	for {
		var env wire.Envelope
		var ok bool
		select {
		case env, ok = <-s.conn.Events():
		case <-ctx.Done():
			s.t.Fatalf("turn %q: no turn_done within %v (%d events)", text, turnTimeout, len(events))
		}
		if !ok {
			s.t.Fatalf("turn %q: connection ended: %v", text, s.conn.Err())
		}
		events = append(events, env)
		switch {
		case env.Type == wire.TypeApprovalRequest:
			var req wire.ApprovalRequest
			if err := env.Decode(&req); err != nil {
				s.t.Fatalf("decode approval_request: %v", err)
			}
			if typ := answer(req); typ != "" {
				ans := wire.MustNew(typ, s.conn.Thread(), "ans-"+req.ApprovalID, wire.ApprovalAnswer{ApprovalID: req.ApprovalID, Reason: "e2e says so"})
				if err := s.conn.Send(ctx, ans); err != nil {
					s.t.Fatalf("send %s: %v", typ, err)
				}
			}
		case env.Type == wire.TypeTurnDone && env.ID == id:
			return events
		}
	}
}

// replacedBy waits on s for sandbox_exited then sandbox_replaced, both
// with reason, and returns the replacement.
func (s *session) replacedBy(reason wire.ExitReason) wire.SandboxReplaced {
	s.t.Helper()
	var ex wire.SandboxExited
	mustDecode(s.t, s.awaitEvent(wire.TypeSandboxExited), &ex)
	if ex.Reason != reason {
		s.t.Fatalf("sandbox_exited %+v, want reason %s", ex, reason)
	}
	var rep wire.SandboxReplaced
	mustDecode(s.t, s.awaitEvent(wire.TypeSandboxReplaced), &rep)
	if rep.Reason != reason || rep.SandboxID == "" {
		s.t.Fatalf("sandbox_replaced %+v, want reason %s", rep, reason)
	}
	return rep
}

// awaitEgressRules waits for the session's next egress_rules event and
// checks its rules and author.
func (s *session) awaitEgressRules(want []string) {
	s.t.Helper()
	var ev wire.EgressRules
	if err := s.awaitEvent(wire.TypeEgressRules).Decode(&ev); err != nil {
		s.t.Fatal(err)
	}
	if !slices.Equal(ev.Rules, want) && !(len(ev.Rules) == 0 && len(want) == 0) || ev.By != wire.EgressByAPI {
		s.t.Fatalf("egress_rules %+v, want rules %v by api", ev, want)
	}
}

// workspaceKB is the size in KiB of the filesystem at /workspace, from df.
func workspaceKB(t *testing.T, s *session) int64 {
	t.Helper()
	r := s.sh("df -k /workspace | tail -n 1", 30)
	f := strings.Fields(r.Output)
	if len(f) < 2 {
		t.Fatalf("df /workspace: %+v", r)
	}
	kb, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("df /workspace: %q: %v", r.Output, err)
	}
	return kb
}

// workspaceFill writes past the workspace cap (capBytes) and checks that
// the write ends in ENOSPC with the file cut at about the cap (the
// filesystem's journal and metadata take the rest).
func workspaceFill(t *testing.T, s *session, capBytes int64) {
	r := s.sh(`dd if=/dev/zero of=/workspace/fill bs=1M count=`+strconv.FormatInt(2*capBytes>>20, 10)+` 2>&1 | grep -v records;`+
		` echo size $(stat -c %s /workspace/fill); rm -f /workspace/fill; df -k /workspace | tail -n 1`, 120)
	t.Logf("workspace fill: %s", strings.TrimSpace(r.Output))
	if !strings.Contains(r.Output, "No space left on device") {
		t.Fatalf("workspace fill: no ENOSPC: %+v", r)
	}
	_, after, _ := strings.Cut(r.Output, "size ")
	f := strings.Fields(after)
	var size int64
	if len(f) > 0 {
		size, _ = strconv.ParseInt(f[0], 10, 64)
	}
	if size < capBytes*3/4 || size > capBytes {
		t.Errorf("the file written was cut at %d bytes, want about the %d-byte cap: %s", size, capBytes, r.Output)
	}
}

// ofType decodes the payloads of the events of type typ into T values.
func ofType[T any](t *testing.T, events []wire.Envelope, typ wire.Type) []T {
	t.Helper()
	var out []T
	for _, env := range events {
		if env.Type != typ {
			continue
		}
		var v T
		if err := env.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		out = append(out, v)
	}
	return out
}

// toolText is every tool_output chunk and tool_result output and error
// of events, joined.
func toolText(t *testing.T, events []wire.Envelope) string {
	t.Helper()
	var b strings.Builder
	for _, o := range ofType[wire.ToolOutput](t, events, wire.TypeToolOutput) {
		b.WriteString(o.Output)
	}
	for _, r := range ofType[wire.ToolResult](t, events, wire.TypeToolResult) {
		b.WriteString("\n" + r.Output + "\n" + r.Error)
	}
	return b.String()
}

func mustDecode(t *testing.T, ev wire.Envelope, v any) {
	t.Helper()
	if err := ev.Decode(v); err != nil {
		raw, _ := json.Marshal(ev)
		t.Fatalf("decode %s: %v", raw, err)
	}
}
