package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/policy"
)

const testPolicy = `{
  "rules": [
    {"tool": "execute", "args": {"command": "git push*"}, "action": "ask", "reason": "pushes code"},
    {"tool": "execute", "args": {"command": "*rm -rf /*"}, "action": "deny"},
    {"tool": "delete_*", "action": "ask"},
    {"tool": "write_file", "args": {"path": "*.env"}, "action": "deny"},
    {"host": "*.github.com", "action": "allow"},
    {"host": "pypi.org:443", "action": "ask"},
    {"host": "evil.example", "action": "deny"},
    {"credential": "git*", "action": "ask"}
  ],
  "credentials": [
    {"name": "git", "host": "git.example.com", "value": "Bearer s3cr3t-git-token"},
    {"name": "api", "host": "127.0.0.1:8443", "header": "X-Api-Key", "value_env": "API_KEY"}
  ],
  "redact": ["planted-secret-123"],
  "approval_timeout": "30s"
}`

func load(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(testPolicy), func(k string) string {
		if k == "API_KEY" {
			return "key-from-env-999"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTool(t *testing.T) {
	t.Parallel()
	p := load(t)
	tests := []struct {
		tool, args string
		want       policy.Action
		rule       string
	}{
		{"execute", `{"command":"git push origin main"}`, policy.Ask, "tool execute command=git push*"},
		{"execute", `{"command":"git push"}`, policy.Ask, "tool execute command=git push*"},
		{"execute", `{"command":"git pull"}`, policy.Allow, ""},
		{"execute", `{"command":"echo git push"}`, policy.Allow, ""},
		{"execute", `{"command":"cd / && rm -rf / --no-preserve-root"}`, policy.Deny, "tool execute command=*rm -rf /*"},
		{"execute", `{}`, policy.Allow, ""},
		{"execute", `not json`, policy.Allow, ""},
		{"delete_file", `{"path":"a"}`, policy.Ask, "tool delete_*"},
		{"write_file", `{"path":"config/.env","content":"x"}`, policy.Deny, "tool write_file path=*.env"},
		{"write_file", `{"path":"main.go"}`, policy.Allow, ""},
		{"read_file", `{"path":"x.env"}`, policy.Allow, ""},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			d := p.Tool(tc.tool, json.RawMessage(tc.args))
			if d.Action != tc.want || d.Rule != tc.rule {
				t.Fatalf("got %+v, want %s by %q", d, tc.want, tc.rule)
			}
		})
	}
}

func TestToolDefaultAndNil(t *testing.T) {
	t.Parallel()
	var nilPolicy *policy.Policy
	if d := nilPolicy.Tool("execute", nil); d.Action != policy.Allow {
		t.Fatalf("nil policy: %+v", d)
	}
	p, err := policy.Parse([]byte(`{"tool_default":"ask"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Tool("ls", json.RawMessage(`{}`)); d.Action != policy.Ask {
		t.Fatalf("default: %+v", d)
	}
}

func TestEgress(t *testing.T) {
	t.Parallel()
	p := load(t)
	tests := []struct {
		host  string
		port  int
		match bool
		want  policy.Action
	}{
		{"api.github.com", 443, true, policy.Allow},
		{"github.com", 443, false, ""},
		{"pypi.org", 443, true, policy.Ask},
		{"pypi.org", 80, false, ""},
		{"evil.example", 8080, true, policy.Deny},
		{"other.example", 443, false, ""},
	}
	for _, tc := range tests {
		d, ok := p.Egress(tc.host, tc.port)
		if ok != tc.match || d.Action != tc.want {
			t.Errorf("%s:%d: got %+v %v, want %v %s", tc.host, tc.port, d, ok, tc.match, tc.want)
		}
	}
	if p.EgressDefault() != policy.Deny {
		t.Errorf("egress default %s", p.EgressDefault())
	}
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	p := load(t)
	tests := []struct {
		host   string
		port   int
		name   string
		header string
	}{
		{"git.example.com", 443, "git", "Authorization"},
		{"git.example.com", 80, "git", "Authorization"},
		{"git.example.com", 8443, "", ""},
		{"127.0.0.1", 8443, "api", "X-Api-Key"},
		{"127.0.0.1", 443, "", ""},
	}
	for _, tc := range tests {
		c, ok := p.CredentialFor(tc.host, tc.port)
		if ok != (tc.name != "") || c.Name != tc.name || c.Header != tc.header {
			t.Errorf("%s:%d: got %+v %v", tc.host, tc.port, c, ok)
		}
	}
	if c, _ := p.CredentialFor("127.0.0.1", 8443); c.Value != "key-from-env-999" {
		t.Errorf("value_env not read: %q", c.Value)
	}
	if d := p.Credential("git"); d.Action != policy.Ask {
		t.Errorf("git use: %+v", d)
	}
	if d := p.Credential("api"); d.Action != policy.Allow {
		t.Errorf("api use: %+v", d)
	}
}

func TestWithRules(t *testing.T) {
	t.Parallel()
	p := load(t)
	rules, err := policy.ParseRules([]byte(`{"rules":[{"tool":"execute","args":{"command":"git push*"},"action":"deny"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := p.WithRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	if d := tp.Tool("execute", json.RawMessage(`{"command":"git push"}`)); d.Action != policy.Deny {
		t.Fatalf("override: %+v", d)
	}
	if d := p.Tool("execute", json.RawMessage(`{"command":"git push"}`)); d.Action != policy.Ask {
		t.Fatalf("bridge policy changed: %+v", d)
	}
	if tp.Timeout() != p.Timeout() || len(tp.Credentials()) != 2 {
		t.Fatal("override lost the bridge's settings")
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"rules":[{"tool":"x","action":"maybe"}]}`,
		`{"rules":[{"action":"allow"}]}`,
		`{"rules":[{"tool":"x","host":"y","action":"allow"}]}`,
		`{"rules":[{"host":"a.com","args":{"x":"y"},"action":"allow"}]}`,
		`{"rules":[{"host":"a.com:99999","action":"allow"}]}`,
		`{"tool_default":"sometimes"}`,
		`{"egress_default":"allow"}`,
		`{"credentials":[{"name":"x","host":"h"}]}`,
		`{"approval_timeout":"-1s"}`,
		`{"unknown_field":1}`,
		`{"redact_patterns":["("]}`,
		`{"redact_patterns":["x*"]}`,
	} {
		if _, err := policy.Parse([]byte(bad), nil); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := policy.ParseRules([]byte(`{"rules":[{"tool":"x","action":"nope"}]}`)); err == nil {
		t.Error("thread rules not checked")
	}
	if _, err := policy.ParseRules([]byte(`{"credentials":[]}`)); err == nil {
		t.Error("a thread may not bring credentials")
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	r := load(t).Redactor()
	tests := []struct{ in, want string }{
		{"token is planted-secret-123 ok", "token is [REDACTED] ok"},
		{"echoed: Bearer s3cr3t-git-token", "echoed: [REDACTED]"},
		{"raw s3cr3t-git-token", "raw [REDACTED]"},
		{"key-from-env-999", "[REDACTED]"},
		{"OPENAI=sk-abcdefghijklmnopqrstuv", "OPENAI=[REDACTED]"},
		{"gh ghp_abcdefghijklmnopqrstuvwxyz0123", "gh [REDACTED]"},
		{"aws AKIAABCDEFGHIJKLMNOP.", "aws [REDACTED]."},
		{"Authorization: bearer abc.def-ghi_jkl012", "Authorization: bearer [REDACTED]"},
		{"nothing secret here; sk-short", "nothing secret here; sk-short"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[REDACTED]"},
	}
	for _, tc := range tests {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if strings.Contains(policy.NewRedactor([]string{"abc"}).Redact("abc"), policy.Mask) {
		t.Error("short secrets must not be masked")
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"git push*", "git push https://x/y.git main", true},
		{"git push*", " git push", false},
		{"a?c", "abc", true},
		{"a.c", "abc", false},
		{"*", "", true},
		{"x*", "x\ny", true},
	}
	for _, tc := range tests {
		if got := policy.Glob(tc.pat).MatchString(tc.s); got != tc.want {
			t.Errorf("Glob(%q).Match(%q) = %v", tc.pat, tc.s, got)
		}
	}
}

func TestHoldFrom(t *testing.T) {
	t.Parallel()
	r := policy.NewRedactor([]string{"supersecret"})
	tests := []struct{ in, hold string }{
		{"plain line\n", ""},
		{"key sk-abcdef", "sk-abcdef"},
		{"Authorization: Bearer ", "Bearer "},
		{"Authorization: Bearer abc", "Bearer abc"},
		{"value: super", "super"},
		{"ends with a prompt? ", ""},
		{"x " + strings.Repeat("a", 400), strings.Repeat("a", policy.MaxHold)},
	}
	for _, tc := range tests {
		if got := tc.in[r.HoldFrom(tc.in):]; got != tc.hold {
			t.Errorf("HoldFrom(%q) holds %q, want %q", tc.in, got, tc.hold)
		}
	}
}

// TestRedactPatterns: the policy's redact_patterns are masked like its
// values, also by a redactor With more secrets, and RedactCount counts.
func TestRedactPatterns(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`{"redact":["planted-value-1"],"redact_patterns":["internal-id-[0-9]{6}"]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Redactor().With([]string{"bridge-secret-42"}, nil)
	got, n := r.RedactCount("ids internal-id-123456, internal-id-12 and planted-value-1, bridge-secret-42")
	if got != "ids [REDACTED], internal-id-12 and [REDACTED], [REDACTED]" || n != 3 {
		t.Errorf("RedactCount = %q, %d", got, n)
	}
	if got, n := r.RedactCount("nothing"); got != "nothing" || n != 0 {
		t.Errorf("RedactCount(nothing) = %q, %d", got, n)
	}
	for _, bad := range []string{`{"redact_patterns":["("]}`, `{"redact_patterns":[".*"]}`} {
		if _, err := policy.Parse([]byte(bad), nil); err == nil || !strings.Contains(err.Error(), "redact_patterns 1") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
