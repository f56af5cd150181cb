package mcptools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

// DefaultFile is where an image declares its MCP servers.
const DefaultFile = "/etc/boxwire/mcp.json"

// DefaultTimeout bounds one call when a server names none.
const DefaultTimeout = 10 * time.Minute

// File is the JSON form of an image's MCP file.
type File struct {
	// Servers are the MCP servers, in the order their tools are offered.
	Servers []Server `json:"servers"`
}

// Server is one stdio MCP server in the sandbox.
type Server struct {
	// Name identifies it in logs and errors (letters, digits, _ or -).
	Name string `json:"name"`
	// Command is the program and its arguments.
	Command []string `json:"command"`
	// Env adds to the command's environment (PATH, HOME, LANG, the egress
	// proxy's variables); it holds no secret: the sandbox can read it.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the command's working directory (default the workspace).
	Dir string `json:"dir,omitempty"`
	// Prefix is put in front of each tool's name as the model sees it.
	Prefix string `json:"prefix,omitempty"`
	// Tools, when set, are globs on the server's tool names to offer.
	Tools []string `json:"tools,omitempty"`
	// Timeout bounds one call, e.g. "2m"; default DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`)
)

// Load reads the MCP file at path. A missing file declares no servers (nil,
// nil); any other problem is an error naming the server and field.
func Load(file string) ([]Server, error) {
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp servers: %w", err)
	}
	servers, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("mcp servers %s: %w", file, err)
	}
	return servers, nil
}

// Parse reads an MCP file's JSON (see Load).
func Parse(raw []byte) ([]Server, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not an MCP servers file: %w", err)
	}
	seen := map[string]bool{}
	for i := range f.Servers {
		s := &f.Servers[i]
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("server %d (%q): %w", i+1, s.Name, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("server %d: the name %q is used twice", i+1, s.Name)
		}
		seen[s.Name] = true
	}
	return f.Servers, nil
}

func (s *Server) check() error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("name must be 1-64 letters, digits, _ or -")
	case len(s.Command) == 0 || s.Command[0] == "":
		return fmt.Errorf("command: the program is missing")
	case !prefixRE.MatchString(s.Prefix):
		return fmt.Errorf("prefix %q: at most 32 letters, digits, _ or -", s.Prefix)
	}
	for _, g := range s.Tools {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("tools: %q is not a glob", g)
		}
	}
	s.timeout = DefaultTimeout
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q is not a positive duration like \"2m\"", s.Timeout)
		}
		s.timeout = d
	}
	return nil
}

// offers reports whether the server's tool called name is offered.
func (s *Server) offers(name string) bool {
	if len(s.Tools) == 0 {
		return true
	}
	for _, g := range s.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
