package egress

import (
	"slices"
	"strconv"
	"strings"
)

// Canonical is the rule written the one way ParseRules reads back to the
// same rule: the normalized host (IPv6 bracketed), its "*." or "." prefix,
// and the port when one was given. Two rules that allow the same targets
// in the same way have the same canonical text.
func (r Rule) Canonical() string {
	host := r.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	switch {
	case r.Suffix && r.Apex:
		host = "." + host
	case r.Suffix:
		host = "*." + host
	}
	if len(r.Ports) == 1 {
		return host + ":" + strconv.Itoa(r.Ports[0])
	}
	return host // the default ports
}

// Within reports whether every target r allows, m allows too: r's ports
// are among m's, both name IP literals or both names, and r's hosts are
// m's host (exact m) or under m's domain (suffix m, with its apex when m
// has one).
func (r Rule) Within(m Rule) bool {
	if r.IP != m.IP {
		return false
	}
	for _, p := range r.Ports {
		if !slices.Contains(m.Ports, p) {
			return false
		}
	}
	under := strings.HasSuffix(r.Host, "."+m.Host)
	switch {
	case !m.Suffix:
		return !r.Suffix && r.Host == m.Host
	case under:
		return true // r's host, and any name under it, is under m's domain
	case r.Host != m.Host:
		return false
	case r.Suffix && !r.Apex:
		return true // *.d within *.d or .d
	}
	return m.Apex // r allows the apex itself (d or .d): only .d covers it
}

// Covers reports whether some rule of rs allows everything r allows.
func (rs Rules) Covers(r Rule) bool {
	for _, m := range rs {
		if r.Within(m) {
			return true
		}
	}
	return false
}
