package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Decision is what the policy says about one action.
type Decision struct {
	Action Action
	// Rule describes the rule that matched; empty for a default.
	Rule string
	// Reason is the rule's reason, if any.
	Reason string
}

// compiled is a Rule with its globs compiled.
type compiled struct {
	Rule
	tool, host, cred *regexp.Regexp
	args             map[string]*regexp.Regexp
	port             int // 0: any
}

func compileAll(rules []Rule) ([]compiled, error) {
	out := make([]compiled, 0, len(rules))
	for i, r := range rules {
		c, err := compile(r)
		if err != nil {
			return nil, fmt.Errorf("policy rule %d (%s): %w", i, r, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func compile(r Rule) (compiled, error) {
	c := compiled{Rule: r}
	switch r.Action {
	case Allow, Deny, Ask:
	default:
		return c, fmt.Errorf("action %q is not allow, deny or ask", r.Action)
	}
	kinds := 0
	for _, s := range []string{r.Tool, r.Host, r.Credential} {
		if s != "" {
			kinds++
		}
	}
	if kinds != 1 {
		return c, fmt.Errorf("a rule names exactly one of tool, host or credential")
	}
	if len(r.Args) > 0 && r.Tool == "" {
		return c, fmt.Errorf("args need a tool")
	}
	switch {
	case r.Tool != "":
		c.tool = Glob(r.Tool)
		c.args = map[string]*regexp.Regexp{}
		for k, v := range r.Args {
			c.args[k] = Glob(v)
		}
	case r.Host != "":
		host := strings.ToLower(strings.TrimSuffix(r.Host, "."))
		if h, p, ok := strings.Cut(host, ":"); ok && !strings.Contains(p, ":") {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return c, fmt.Errorf("port %q is not a number from 1 to 65535", p)
			}
			host, c.port = h, n
		}
		c.host = Glob(host)
	default:
		c.cred = Glob(r.Credential)
	}
	return c, nil
}

// Glob compiles a glob in which * matches any run of characters (slashes
// and spaces included), ? any one character, and everything else itself.
// It matches the whole text.
func Glob(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// Tool decides a tool call: the first rule whose tool glob matches name
// and whose argument globs all match args decides; else ToolDefault.
// Arguments that are not a JSON object match no rule with Args.
func (p *Policy) Tool(name string, args json.RawMessage) Decision {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(args, &fields)
	for _, c := range p.compiledRules() {
		if c.tool == nil || !c.tool.MatchString(name) || !argsMatch(c.args, fields) {
			continue
		}
		return Decision{Action: c.Action, Rule: c.String(), Reason: c.Reason}
	}
	if p == nil {
		return Decision{Action: Allow}
	}
	return Decision{Action: p.f.ToolDefault}
}

func argsMatch(globs map[string]*regexp.Regexp, fields map[string]json.RawMessage) bool {
	for k, g := range globs {
		raw, ok := fields[k]
		if !ok {
			return false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		if !g.MatchString(s) {
			return false
		}
	}
	return true
}

// Egress decides a connection to host:port (host normalized: lower case,
// no trailing dot). ok is false when no rule matches: the egress
// allowlist, then EgressDefault, decide.
func (p *Policy) Egress(host string, port int) (d Decision, ok bool) {
	for _, c := range p.compiledRules() {
		if c.host != nil && c.host.MatchString(host) && (c.port == 0 || c.port == port) {
			return Decision{Action: c.Action, Rule: c.String(), Reason: c.Reason}, true
		}
	}
	return Decision{}, false
}

// Credential decides one use of the named credential: the first credential
// rule matching name, else Allow (configuring a credential allows its use).
func (p *Policy) Credential(name string) Decision {
	for _, c := range p.compiledRules() {
		if c.cred != nil && c.cred.MatchString(name) {
			return Decision{Action: c.Action, Rule: c.String(), Reason: c.Reason}
		}
	}
	return Decision{Action: Allow}
}

// CredentialFor returns the credential configured for host:port.
func (p *Policy) CredentialFor(host string, port int) (Credential, bool) {
	for _, c := range p.file().Credentials {
		h, ps, hasPort := strings.Cut(strings.ToLower(c.Host), ":")
		if h != host {
			continue
		}
		if hasPort && ps == strconv.Itoa(port) || !hasPort && (port == 443 || port == 80) {
			return c, true
		}
	}
	return Credential{}, false
}

func (p *Policy) compiledRules() []compiled {
	if p == nil {
		return nil
	}
	return p.rules
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// HasHostRules reports whether any rule is about egress hosts.
func (p *Policy) HasHostRules() bool {
	for _, c := range p.compiledRules() {
		if c.host != nil {
			return true
		}
	}
	return false
}
