package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// approvalTimeout is the policy's approval_timeout in these scenarios:
// long enough for the test client to answer on a slow machine, short
// enough to wait out once.
const approvalTimeout = 8 * time.Second

// approvalRig is one bridge with an approval policy, host-held
// credentials for a plain and a TLS loopback push server, and a third
// loopback server no rule allows.
type approvalRig struct {
	e                 *env
	plain, tls, other *pushServer
	secret, planted   string
}

func newApprovalRig(t *testing.T) *approvalRig {
	r := &approvalRig{
		plain: newPushServer(t, false), tls: newPushServer(t, true), other: newPushServer(t, false),
		secret:  "Bearer e2e-host-held-" + randHex(12),
		planted: "planted-" + randHex(8),
	}
	quote := func(s string) string { return fmt.Sprintf("%q", s) }
	run := func(id, cmd string) string {
		return fmt.Sprintf(`{"id":%s,"name":"execute","arguments":{"command":%s}}`, quote(id), quote(cmd))
	}
	turn := func(when, id, cmd string) string {
		return fmt.Sprintf(`{"when":%s,"steps":[{"tool_calls":[%s]},{"content":"done"}]}`, quote(when), run(id, cmd))
	}
	script := `{"turns":[` + strings.Join([]string{
		turn("push plain", "plain", viaProxy("http://"+r.plain.hostPort()+"/plain")),
		turn("push tls", "tls", viaProxy("https://"+r.tls.hostPort()+"/tls")),
		turn("push deny", "deny", viaProxy("http://"+r.plain.hostPort()+"/deny")),
		turn("push timeout", "timeout", viaProxy("http://"+r.plain.hostPort()+"/timeout")),
		turn("other host", "other", viaProxy("http://"+r.other.hostPort()+"/other")),
		turn("tool rule", "toolrule", "echo would git push origin main"),
		turn("redact", "redact", "printf 'key sk-abcdefghijkl'; sleep 1; printf 'mnopqrstuvwx done\\n'; echo "+r.planted),
	}, ",") + `]}`
	r.e = newEnv(t, script)
	pol := fmt.Sprintf(`{
  "rules": [
    {"credential": "push-*", "action": "ask", "reason": "pushes code"},
    {"tool": "execute", "args": {"command": "*git push*"}, "action": "ask"}
  ],
  "egress_default": "ask",
  "credentials": [
    {"name": "push-plain", "host": %q, "value_env": "E2E_PUSH_SECRET"},
    {"name": "push-tls", "host": %q, "value_env": "E2E_PUSH_SECRET"}
  ],
  "redact": [%q],
  "approval_timeout": %q
}`, r.plain.hostPort(), r.tls.hostPort(), r.planted, approvalTimeout.String())
	polFile := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(polFile, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	r.e.startBridge("BOXWIRE_POLICY="+polFile, "BOXWIRE_EGRESS_ROOTS="+r.tls.writeCA(t), "E2E_PUSH_SECRET="+r.secret)
	return r
}

// TestApprovals drives the approval layers end to end: host-held
// credentials over plain HTTP and TLS added only after a person approved,
// deny and timeout blocking a push, an unknown host held then refused, a
// cooperative tool rule, and redaction of streamed output.
func TestApprovals(t *testing.T) {
	r := newApprovalRig(t)
	for _, tc := range []struct {
		name string
		srv  *pushServer
		path string
	}{
		{"push plain", r.plain, "/plain"},
		{"push tls", r.tls, "/tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := r.e.dial("")
			var approvedAt time.Time
			events := s.turnAnswering(tc.name, func(req wire.ApprovalRequest) wire.Type {
				if req.Kind != wire.ApprovalCredential || !strings.HasSuffix(req.URL, tc.path) {
					t.Errorf("approval request %+v: want a credential use for %s", req, tc.path)
					return wire.TypeDeny
				}
				if n := len(tc.srv.got(tc.path)); n != 0 {
					t.Errorf("the server had %d requests before the approval", n)
				}
				approvedAt = time.Now()
				return wire.TypeApprove
			})
			got := tc.srv.got(tc.path)
			if len(got) != 1 {
				t.Fatalf("server got %d requests to %s, want 1; tool output:\n%s", len(got), tc.path, toolText(t, events))
			}
			if got[0].auth != r.secret {
				t.Errorf("request arrived with Authorization %q, want the host-held credential", got[0].auth)
			}
			if approvedAt.IsZero() || got[0].at.Before(approvedAt) {
				t.Errorf("request arrived at %v, approval sent at %v", got[0].at, approvedAt)
			}
			if out := toolText(t, events); !strings.Contains(out, "pushed "+tc.path) || !strings.Contains(out, "status=200") {
				t.Errorf("tool output does not show the push:\n%s", out)
			}
			decs := ofType[wire.ApprovalDecision](t, events, wire.TypeApprovalDecision)
			if len(decs) != 1 || decs[0].Verdict != wire.VerdictApproved || !strings.HasPrefix(decs[0].By, "c") {
				t.Errorf("audit decisions %+v: want one approval by a client", decs)
			}
			if where := r.e.sandboxHolds(s.conn.Thread(), strings.TrimPrefix(r.secret, "Bearer ")); where != "" {
				t.Errorf("the sandbox holds the credential:\n%s", where)
			}
		})
	}

	refusals := []struct {
		name, path string
		srv        *pushServer
		kind       string
		answer     wire.Type
		by         string
	}{
		{"push deny", "/deny", r.plain, wire.ApprovalCredential, wire.TypeDeny, "c"},
		{"push timeout", "/timeout", r.plain, wire.ApprovalCredential, "", wire.ByTimeout},
		{"other host", "/other", r.other, wire.ApprovalEgress, wire.TypeDeny, "c"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			s := r.e.dial("")
			asked := 0
			events := s.turnAnswering(tc.name, func(req wire.ApprovalRequest) wire.Type {
				asked++
				if req.Kind != tc.kind {
					t.Errorf("approval request kind %q, want %q", req.Kind, tc.kind)
				}
				if n := len(tc.srv.got(tc.path)); n != 0 {
					t.Errorf("held request reached the server (%d) before an answer", n)
				}
				return tc.answer
			})
			if asked != 1 {
				t.Errorf("%d approval requests, want 1", asked)
			}
			if n := len(tc.srv.got(tc.path)); n != 0 {
				t.Errorf("server got %d requests to %s, want none", n, tc.path)
			}
			out := toolText(t, events)
			if !strings.Contains(out, "status=403") || !strings.Contains(out, "refused") {
				t.Errorf("tool output does not show the refusal:\n%s", out)
			}
			decs := ofType[wire.ApprovalDecision](t, events, wire.TypeApprovalDecision)
			if len(decs) != 1 || decs[0].Verdict != wire.VerdictDenied || !strings.HasPrefix(decs[0].By, tc.by) {
				t.Errorf("audit decisions %+v: want one denial by %q", decs, tc.by)
			}
		})
	}

	t.Run("tool rule", func(t *testing.T) {
		s := r.e.dial("")
		events := s.turnAnswering("tool rule", func(req wire.ApprovalRequest) wire.Type {
			if req.Kind != wire.ApprovalTool || req.Tool != "execute" {
				t.Errorf("approval request %+v: want the execute call", req)
			}
			return wire.TypeDeny
		})
		res := ofType[wire.ToolResult](t, events, wire.TypeToolResult)
		if len(res) != 1 || !strings.Contains(res[0].Output+res[0].Error, "not run: denied by c") {
			t.Errorf("tool results %+v: want the call refused by the client", res)
		}
		if strings.Contains(toolText(t, events), "would git push") {
			t.Errorf("the denied command ran")
		}
	})

	t.Run("redact", func(t *testing.T) {
		s := r.e.dial("")
		events := s.turnAnswering("redact", func(wire.ApprovalRequest) wire.Type { return wire.TypeDeny })
		out := toolText(t, events)
		for _, leak := range []string{r.planted, "abcdefghijkl", "mnopqrstuvwx"} {
			if strings.Contains(out, leak) {
				t.Errorf("tool events show %q:\n%s", leak, out)
			}
		}
		if !strings.Contains(out, policy.Mask) || !strings.Contains(out, "done") {
			t.Errorf("tool events do not show masked output:\n%s", out)
		}
	})

	// The real client binary answers for its user: --auto-approve lets the
	// push through with the host-held credential, --auto-deny stops it.
	t.Run("client binary", func(t *testing.T) {
		before := len(r.plain.got("/plain"))
		out, errOut, code := r.e.runClient("--url", r.e.bridge.url, "--auto-approve", "-m", "push plain")
		if code != 0 {
			t.Fatalf("client --auto-approve exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		got := r.plain.got("/plain")
		if len(got) != before+1 || got[len(got)-1].auth != r.secret {
			t.Fatalf("after --auto-approve the server got %d requests (had %d)", len(got), before)
		}
		out, errOut, _ = r.e.runClient("--url", r.e.bridge.url, "--auto-deny", "-m", "push plain")
		if n := len(r.plain.got("/plain")); n != before+1 {
			t.Fatalf("after --auto-deny the server got a push\nstdout:\n%s\nstderr:\n%s", out, errOut)
		}
		if !strings.Contains(out+errOut, "refused") {
			t.Errorf("the denied push's refusal is not shown:\nstdout:\n%s\nstderr:\n%s", out, errOut)
		}

		// Interactive: the chat shows the request and asks; "y" approves.
		before = len(r.plain.got("/plain"))
		p := r.e.startPTYEnv(r.e.colorEnv(t.TempDir()), "--url", r.e.bridge.url)
		p.expect("› ", startTimeout)
		p.send("push plain\r")
		p.expect("approve? [y/N]", turnTimeout)
		p.send("y\r")
		p.expect("done", turnTimeout)
		if n := len(r.plain.got("/plain")); n != before+1 {
			t.Fatalf("after answering y the server got %d requests (had %d)", n, before)
		}

		// --json: the request is printed as a JSON line and a verdict line
		// read from stdin answers it.
		before = len(r.plain.got("/plain"))
		ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, clientBinary(t), "--url", r.e.bridge.url, "--json", "-m", "push plain")
		cmd.Env = r.e.clientEnv()
		cmd.Stdin = strings.NewReader(`{"verdict":"approve"}` + "\n")
		jsonOut, err := cmd.Output()
		if err != nil {
			t.Fatalf("client --json: %v\n%s", err, jsonOut)
		}
		if !strings.Contains(string(jsonOut), `"type":"approval_request"`) {
			t.Errorf("no approval_request line in --json output:\n%s", jsonOut)
		}
		if n := len(r.plain.got("/plain")); n != before+1 {
			t.Fatalf("after a JSON verdict the server got %d requests (had %d)", n, before)
		}
	})
}
