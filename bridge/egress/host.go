package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Limits on names (RFC 1035).
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// Target is a normalized destination: Host is lower-case ASCII (IDNA
// A-labels) without a trailing dot, or a canonical IP address text; IP is
// set for IP literals.
type Target struct {
	Host string
	Port int
	IP   netip.Addr
}

// String is host:port, bracketing IPv6.
func (t Target) String() string {
	if t.IP.Is6() {
		return "[" + t.Host + "]:" + strconv.Itoa(t.Port)
	}
	return t.Host + ":" + strconv.Itoa(t.Port)
}

// idnaProfile maps and validates names as a resolver would look them up:
// case folded, width folded (fullwidth letters, ideographic full stops),
// checked against the IDNA2008 rules, encoded as A-labels.
var idnaProfile = idna.New(idna.MapForLookup(), idna.Transitional(false),
	idna.StrictDomainName(true), idna.BidiRule(), idna.ValidateLabels(true))

// Normalize parses an authority ("host:port", "[v6]:port", or "host" with
// defaultPort > 0) into a Target. It refuses anything that could be read
// two ways: userinfo, percent escapes, empty or over-long labels, bad or
// leading-zero ports, numeric final labels that some resolvers read as
// IPv4 ("2130706433", "0x7f.1", "127.1"), and IPv6 zones.
func Normalize(authority string, defaultPort int) (Target, error) {
	if authority == "" {
		return Target{}, errors.New("empty host")
	}
	if strings.ContainsAny(authority, "@%\\/?#") || strings.ContainsFunc(authority, isSpaceOrControl) {
		return Target{}, fmt.Errorf("host %q has characters a host name cannot have", authority)
	}
	host, portText, err := splitHostPort(authority, defaultPort)
	if err != nil {
		return Target{}, err
	}
	port, err := parsePort(portText)
	if err != nil {
		return Target{}, err
	}
	if strings.HasPrefix(host, "[") {
		return ipTarget(strings.Trim(host, "[]"), port, true)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		return Target{Host: ip.String(), Port: port, IP: ip}, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return Target{}, err
	}
	return Target{Host: name, Port: port}, nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// splitHostPort splits off the port; a bare host gets defaultPort.
func splitHostPort(s string, defaultPort int) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", fmt.Errorf("host %q: unclosed bracket", s)
		}
		host, rest := s[:end+1], s[end+1:]
		switch {
		case rest == "" && defaultPort > 0:
			return host, strconv.Itoa(defaultPort), nil
		case strings.HasPrefix(rest, ":"):
			return host, rest[1:], nil
		}
		return "", "", fmt.Errorf("host %q: needs a port", s)
	}
	switch strings.Count(s, ":") {
	case 0:
		if defaultPort <= 0 {
			return "", "", fmt.Errorf("host %q: needs a port", s)
		}
		return s, strconv.Itoa(defaultPort), nil
	case 1:
		host, port, _ = strings.Cut(s, ":")
		return host, port, nil
	}
	return "", "", fmt.Errorf("host %q: IPv6 addresses must be bracketed", s)
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}

func ipTarget(s string, port int, bracketed bool) (Target, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" || (bracketed && !ip.Is6()) {
		return Target{}, fmt.Errorf("host %q is not an IP address literal", s)
	}
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	return Target{Host: ip.String(), Port: port, IP: ip}, nil
}

// normalizeName returns the lookup form of a DNS name or an error.
func normalizeName(host string) (string, error) {
	name, err := idnaProfile.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("host %q is not a valid name: %w", host, err)
	}
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > maxNameLen {
		return "", fmt.Errorf("host %q is not a valid name", host)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > maxLabelLen || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") ||
			strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return "", fmt.Errorf("host %q has an invalid label %q", host, l)
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || (strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
		return "", fmt.Errorf("host %q looks like a numeric IP address; allow the address itself", host)
	}
	return name, nil
}
