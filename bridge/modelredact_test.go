package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/server"
)

// TestModelRedaction: what the model sees of tool output is masked of
// every secret the bridge holds — its token and model key, the policy's
// credentials (the value and the part after "Bearer "), redact values and
// redact_patterns, the host tools' env, env_from and header values — and
// of everything a thread's own policy masks (a thread's policy adds rules
// only: its secrets are the bridge's), the mask counted for the model's
// note. Loaded the way the bridge loads them (applyApprovals,
// applyHostTools).
func TestModelRedaction(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"CRED": "Bearer cred-value-123456", "GH": "gh-env-secret-654321", "AUTH": "Bearer header-token-777777"}
	getenv := func(k string) string { return env[k] }
	pol := write("policy.json", `{"credentials":[{"name":"api","host":"api.example.com","value_env":"CRED"}],
		"redact":["plain-redact-value"],"redact_patterns":["acct-[0-9]{6}"]}`)
	tools := write("host-tools.json", `{"servers":[
		{"name":"gh","command":["/bin/true"],"env":{"LITERAL":"literal-env-secret"},"env_from":{"GITHUB_TOKEN":"GH"}},
		{"name":"web","url":"https://mcp.example/mcp","headers_from":{"Authorization":"AUTH"}}]}`)
	cfg := server.Config{Token: "bridge-token-abcdef", LLM: llmproxy.Config{APIKey: "upstream-key-abcdef"}}
	if err := applyApprovals(&cfg, pol, getenv); err != nil {
		t.Fatal(err)
	}
	if err := (hostToolsOptions{hostTools: tools}).applyHostTools(&cfg, getenv, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cfg.HostTools.Close() })
	thread, err := approval.ThreadPolicy(cfg.Policy, []byte(`{"rules":[{"tool":"execute","action":"ask"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"bridge-token-abcdef", "upstream-key-abcdef", "Bearer cred-value-123456", "cred-value-123456",
		"plain-redact-value", "acct-123456", "literal-env-secret", "gh-env-secret-654321", "header-token-777777"} {
		out, n := cfg.LLM.RedactForModel("output: " + secret + " (end)")
		if strings.Contains(out, secret) || n == 0 {
			t.Errorf("%q reaches the model: %q (%d masked)", secret, out, n)
		}
	}
	// Whatever the thread's policy masks for clients and the log, the
	// model does not see either.
	for _, text := range []string{"key sk-abcdefghijklmnop1234 here", "cred-value-123456", "acct-999999"} {
		if byThread := thread.Redactor().Redact(text); byThread != text {
			if out, _ := cfg.LLM.RedactForModel(text); out != byThread {
				t.Errorf("%q: the thread's policy masks it to %q, the model sees %q", text, byThread, out)
			}
		}
	}
}
