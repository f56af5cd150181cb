package policy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"
)

// Action is what a rule says to do.
type Action string

// Actions.
const (
	Allow Action = "allow"
	Deny  Action = "deny"
	Ask   Action = "ask"
)

// DefaultTimeout is how long an approval request waits for an answer
// when the policy does not say.
const DefaultTimeout = 2 * time.Minute

// Rule matches one kind of action: a tool call (Tool set), an egress host
// (Host set) or a credential use (Credential set); exactly one of them.
type Rule struct {
	// Tool is a glob on the tool name ("execute", "*").
	Tool string `json:"tool,omitempty"`
	// Args maps top-level fields of the tool's JSON arguments to globs;
	// every field must match (a missing field never matches). Non-string
	// values are matched as their JSON text.
	Args map[string]string `json:"args,omitempty"`
	// Host is a glob on the egress host name, optionally with ":port"
	// ("*.github.com", "127.0.0.1:8443").
	Host string `json:"host,omitempty"`
	// Credential is a glob on a credential's name.
	Credential string `json:"credential,omitempty"`
	// Action is allow, deny or ask.
	Action Action `json:"action"`
	// Reason is shown with a denial or an approval request.
	Reason string `json:"reason,omitempty"`
}

// String describes the rule for audit events, e.g.
// "tool execute command=git push*".
func (r Rule) String() string {
	switch {
	case r.Tool != "":
		var b strings.Builder
		b.WriteString("tool " + r.Tool)
		for _, k := range sortedKeys(r.Args) {
			b.WriteString(" " + k + "=" + r.Args[k])
		}
		return b.String()
	case r.Host != "":
		return "host " + r.Host
	}
	return "credential " + r.Credential
}

// Credential is a secret the egress proxy adds to requests to Host, so the
// sandbox never holds it.
type Credential struct {
	// Name identifies it in rules and events.
	Name string `json:"name"`
	// Host is the exact host (and optional ":port"; default 443 and 80)
	// whose requests get the credential.
	Host string `json:"host"`
	// Header is the header to set; default "Authorization".
	Header string `json:"header,omitempty"`
	// Value is the header's value; ValueEnv names an environment variable
	// of the bridge holding it instead (read once by Load).
	Value    string `json:"value,omitempty"`
	ValueEnv string `json:"value_env,omitempty"`
}

// LogValue never logs the value.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", c.Name), slog.String("host", c.Host), slog.String("header", c.Header))
}

// Duration is a time.Duration written as "90s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"90s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("duration %q is not a positive Go duration", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// File is the JSON form of a policy file.
type File struct {
	// Rules are checked in order; the first match decides.
	Rules []Rule `json:"rules"`
	// ToolDefault is the action for tool calls no rule matches; default allow.
	ToolDefault Action `json:"tool_default,omitempty"`
	// EgressDefault is the action for egress hosts that neither a rule nor
	// the allowlist allows: deny (default) or ask.
	EgressDefault Action `json:"egress_default,omitempty"`
	// Credentials are the host-held credentials.
	Credentials []Credential `json:"credentials,omitempty"`
	// Redact lists more secret values to mask in tool output.
	Redact []string `json:"redact,omitempty"`
	// RedactPatterns are regular expressions (RE2) whose matches are
	// masked like Redact's values: in tool output before clients and the
	// log see it, and before the model does (docs/approvals.md).
	RedactPatterns []string `json:"redact_patterns,omitempty"`
	// Timeout is how long an approval request waits; default DefaultTimeout.
	Timeout Duration `json:"approval_timeout,omitempty"`
}

// Policy is a checked, immutable policy. The zero value allows every tool
// call, refuses unlisted egress and holds no credentials.
type Policy struct {
	f        File
	rules    []compiled
	redactor *Redactor
}

// Parse checks a policy file's JSON. getenv resolves Credential.ValueEnv.
func Parse(data []byte, getenv func(string) string) (*Policy, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	for i, c := range f.Credentials {
		if c.ValueEnv != "" && c.Value == "" && getenv != nil {
			f.Credentials[i].Value = getenv(c.ValueEnv)
		}
		if f.Credentials[i].Header == "" {
			f.Credentials[i].Header = "Authorization"
		}
		if c.Name == "" || c.Host == "" || f.Credentials[i].Value == "" {
			return nil, fmt.Errorf("policy: credential %d needs a name, a host and a value (or value_env set)", i)
		}
	}
	return New(f)
}

// Load reads and checks a policy file.
func Load(path string, getenv func(string) string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(data, getenv)
}

// New checks f and returns its Policy.
func New(f File) (*Policy, error) {
	switch f.ToolDefault {
	case "":
		f.ToolDefault = Allow
	case Allow, Deny, Ask:
	default:
		return nil, fmt.Errorf("policy: tool_default %q is not allow, deny or ask", f.ToolDefault)
	}
	switch f.EgressDefault {
	case "":
		f.EgressDefault = Deny
	case Deny, Ask:
	default:
		return nil, fmt.Errorf("policy: egress_default %q is not deny or ask", f.EgressDefault)
	}
	if f.Timeout <= 0 {
		f.Timeout = Duration(DefaultTimeout)
	}
	p := &Policy{f: f}
	var err error
	if p.rules, err = compileAll(f.Rules); err != nil {
		return nil, err
	}
	secrets := append([]string(nil), f.Redact...)
	for _, c := range f.Credentials {
		secrets = append(secrets, c.Value)
		if _, tok, ok := strings.Cut(c.Value, " "); ok {
			secrets = append(secrets, tok) // "Bearer X": X alone too
		}
	}
	var patterns []*regexp.Regexp
	for i, expr := range f.RedactPatterns {
		re, err := regexp.Compile(expr)
		switch {
		case err != nil:
			return nil, fmt.Errorf("policy: redact_patterns %d (%q) is not a regular expression: %w", i+1, expr, err)
		case re.MatchString(""):
			return nil, fmt.Errorf("policy: redact_patterns %d (%q) matches the empty string", i+1, expr)
		}
		patterns = append(patterns, re)
	}
	p.redactor = NewRedactor(nil).With(secrets, patterns)
	return p, nil
}

// WithRules returns a policy whose rules are rules, then p's (a thread's
// override); everything else is p's.
func (p *Policy) WithRules(rules []Rule) (*Policy, error) {
	if len(rules) == 0 {
		return p, nil
	}
	f := p.file()
	f.Rules = append(append([]Rule(nil), rules...), f.Rules...)
	return New(f)
}

// ParseRules reads a thread's override: {"rules": [...]}.
func ParseRules(data []byte) ([]Rule, error) {
	var o struct {
		Rules []Rule `json:"rules"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("thread policy: %w", err)
	}
	if _, err := compileAll(o.Rules); err != nil {
		return nil, fmt.Errorf("thread policy: %w", err)
	}
	return o.Rules, nil
}

func (p *Policy) file() File {
	if p == nil {
		return File{}
	}
	return p.f
}

// Timeout is how long an approval request waits.
func (p *Policy) Timeout() time.Duration {
	if p == nil || p.f.Timeout <= 0 {
		return DefaultTimeout
	}
	return time.Duration(p.f.Timeout)
}

// EgressDefault is the action for hosts nothing allows: Deny or Ask.
func (p *Policy) EgressDefault() Action {
	if p == nil || p.f.EgressDefault == "" {
		return Deny
	}
	return p.f.EgressDefault
}

// Credentials returns the host-held credentials.
func (p *Policy) Credentials() []Credential {
	return append([]Credential(nil), p.file().Credentials...)
}

// Redactor masks this policy's secrets and the common key patterns.
func (p *Policy) Redactor() *Redactor {
	if p == nil || p.redactor == nil {
		return NewRedactor(nil)
	}
	return p.redactor
}
