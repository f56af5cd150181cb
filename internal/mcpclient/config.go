package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultTimeout bounds one call when a server's declaration names none.
const DefaultTimeout = 10 * time.Minute

// MaxServers is the most servers one declaration may name.
const MaxServers = 32

// Server is a checked in-sandbox MCP server declaration.
type Server struct {
	wire.MCPServer
	// CallTimeout is Timeout parsed (DefaultTimeout when it is empty).
	CallTimeout time.Duration
}

// Parse reads an MCP servers declaration (wire.MCPServers: an image's
// file, a thread's CreateThread.MCP) and checks every server; an unknown
// field, a broken server or a name used twice is an error naming the
// server and field. Empty raw declares none.
func Parse(raw []byte) ([]Server, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return nil, nil
	}
	var f wire.MCPServers
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not an MCP servers declaration ({\"servers\": [...]}): %w", err)
	}
	if dec.More() {
		return nil, errors.New("not an MCP servers declaration: more after its JSON object")
	}
	if len(f.Servers) > MaxServers {
		return nil, fmt.Errorf("%d servers; at most %d", len(f.Servers), MaxServers)
	}
	out := make([]Server, 0, len(f.Servers))
	for i, s := range f.Servers {
		c, err := Check(s)
		if err != nil {
			return nil, fmt.Errorf("server %d (%q): %w", i+1, s.Name, err)
		}
		if slices.ContainsFunc(out, func(o Server) bool { return o.Name == s.Name }) {
			return nil, fmt.Errorf("server %d: the name %q is used twice", i+1, s.Name)
		}
		out = append(out, c)
	}
	return out, nil
}

// Check checks one in-sandbox server declaration.
func Check(s wire.MCPServer) (Server, error) {
	if err := CheckName(s.Name); err != nil {
		return Server{}, err
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return Server{}, errors.New("command: the program is missing")
	}
	d, err := CheckOffer(s.Prefix, s.Timeout, Globs{"tools", s.Tools})
	if err != nil {
		return Server{}, err
	}
	return Server{MCPServer: s, CallTimeout: d}, nil
}

// CheckName checks a server's name: 1-64 letters, digits, _ or -.
func CheckName(name string) error {
	if !word(name, 1, 64) {
		return errors.New("name must be 1-64 letters, digits, _ or -")
	}
	return nil
}

// Globs are a declaration's globs of one field ("tools", "images", …).
type Globs struct {
	Field string
	Globs []string
}

// CheckOffer checks what decides how a server's tools are offered — its
// prefix and its globs — and parses its timeout (DefaultTimeout when
// empty).
func CheckOffer(prefix, timeout string, globs ...Globs) (time.Duration, error) {
	if !word(prefix, 0, 32) { // prefixed names stay valid function names for the model
		return 0, fmt.Errorf("prefix %q: at most 32 letters, digits, _ or -", prefix)
	}
	for _, g := range globs {
		for _, glob := range g.Globs {
			if _, err := path.Match(glob, ""); err != nil || glob == "" {
				return 0, fmt.Errorf("%s: %q is not a glob", g.Field, glob)
			}
		}
	}
	if timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q is not a positive duration like \"2m\"", timeout)
	}
	return d, nil
}

// word reports whether s is lo to hi letters, digits, _ or - (ASCII).
// It is not a regexp: compiling `^[A-Za-z0-9_-]{1,64}$` and its prefix
// twin at start-up took 90 KB of the agent's idle heap.
func word(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// MatchAny reports whether v matches one of globs (path.Match: "*" does
// not cross "/"); no globs match everything.
func MatchAny(globs []string, v string) bool {
	return len(globs) == 0 || slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, v)
		return ok
	})
}
