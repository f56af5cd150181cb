package egress

import (
	"fmt"
	"strings"
)

// defaultPorts are the ports a rule without a port allows.
var defaultPorts = []int{80, 443}

// Rule allows one host (Suffix false) or every name under a domain.
type Rule struct {
	// Text is the rule as written, reported in decisions.
	Text string
	// Host is normalized; for a suffix rule it is the domain.
	Host string
	// Suffix makes the rule match names under Host; Apex also matches Host.
	Suffix, Apex bool
	// Ports are the allowed ports.
	Ports []int
	// IP says Host is an IP literal (allowed explicitly).
	IP bool
}

// Rules is an allowlist; the zero value allows nothing.
type Rules []Rule

// ParseRules parses allowlist entries:
//
//	example.com          that host, ports 80 and 443
//	example.com:8443     that host and port
//	*.example.com        names under example.com (not example.com itself)
//	.example.com         example.com and every name under it
//	127.0.0.1:8080       an IP address, which must be written as one
//	[::1]:8080
//
// Names are normalized as requests are (case, trailing dot, IDNA).
func ParseRules(entries []string) (Rules, error) {
	var rules Rules
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		r, err := parseRule(e)
		if err != nil {
			return nil, fmt.Errorf("egress rule %q: %w", e, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(text string) (Rule, error) {
	r := Rule{Text: text}
	rest := text
	switch {
	case strings.HasPrefix(rest, "*."):
		r.Suffix, rest = true, rest[2:]
	case strings.HasPrefix(rest, "."):
		r.Suffix, r.Apex, rest = true, true, rest[1:]
	}
	portGiven := strings.HasPrefix(rest, "[") && strings.Contains(rest, "]:") ||
		!strings.HasPrefix(rest, "[") && strings.Count(rest, ":") == 1
	t, err := Normalize(rest, 443)
	if err != nil {
		return Rule{}, err
	}
	r.Host, r.IP = t.Host, t.IP.IsValid()
	if r.IP && r.Suffix {
		return Rule{}, fmt.Errorf("an IP address cannot be a domain suffix")
	}
	r.Ports = defaultPorts
	if portGiven {
		r.Ports = []int{t.Port}
	}
	return r, nil
}

// Match returns the first rule that allows t.
func (rs Rules) Match(t Target) (Rule, bool) {
	for _, r := range rs {
		if r.matches(t) {
			return r, true
		}
	}
	return Rule{}, false
}

func (r Rule) matches(t Target) bool {
	portOK := false
	for _, p := range r.Ports {
		portOK = portOK || p == t.Port
	}
	if !portOK || r.IP != t.IP.IsValid() {
		return false
	}
	switch {
	case t.Host == r.Host:
		return !r.Suffix || r.Apex
	case r.Suffix:
		return strings.HasSuffix(t.Host, "."+r.Host)
	}
	return false
}
