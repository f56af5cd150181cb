package hosttools

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

// DefaultTimeout bounds one call when a server's config names none.
const DefaultTimeout = mcpclient.DefaultTimeout

// File is the JSON form of the host tools file (--host-tools).
type File struct {
	// Servers are the MCP servers, in the order their tools are offered
	// (a tool name already taken by an earlier server is skipped).
	Servers []ServerConfig `json:"servers"`
}

// ServerConfig is one MCP server. Exactly one of Command and URL is set.
type ServerConfig struct {
	// Name identifies the server in logs and errors: letters, digits, "_"
	// and "-".
	Name string `json:"name"`
	// Command runs a stdio server: the program and its arguments. It gets
	// only PATH, HOME, LANG and TMPDIR of the bridge's environment, then
	// Env and EnvFrom — never the bridge's token or model key.
	Command []string `json:"command,omitempty"`
	// Env sets the command's environment variables.
	Env map[string]string `json:"env,omitempty"`
	// EnvFrom sets a variable of the command from one of the bridge's
	// (name in the command: name in the bridge), so the file need not
	// hold the secret.
	EnvFrom map[string]string `json:"env_from,omitempty"`
	// Dir is the command's working directory (default the bridge's).
	Dir string `json:"dir,omitempty"`
	// URL is a streamable-HTTP server's endpoint (http or https).
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to URL (e.g. Authorization);
	// HeadersFrom takes a header's value from the bridge's environment.
	Headers     map[string]string `json:"headers,omitempty"`
	HeadersFrom map[string]string `json:"headers_from,omitempty"`
	// Prefix is put in front of each tool's name as the model sees it
	// (e.g. "gh_"); default none.
	Prefix string `json:"prefix,omitempty"`
	// Tools, when set, are globs on the server's tool names: only those
	// are offered.
	Tools []string `json:"tools,omitempty"`
	// Images, Users and Threads, when set, are globs: the server's tools
	// are offered only to threads whose image reference, owner and id
	// match one of each.
	Images  []string `json:"images,omitempty"`
	Users   []string `json:"users,omitempty"`
	Threads []string `json:"threads,omitempty"`
	// Timeout bounds one call, e.g. "2m"; default DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
	secrets []string // values of Env, EnvFrom, Headers, HeadersFrom
}

// LogValue logs the server without its environment or headers.
func (c ServerConfig) LogValue() slog.Value {
	where := c.URL
	if len(c.Command) > 0 {
		where = c.Command[0]
	}
	return slog.GroupValue(slog.String("name", c.Name), slog.String("at", where))
}

// Load reads the host tools file at path; getenv reads the bridge's
// environment for EnvFrom and HeadersFrom. Every mistake is an error
// naming the server and field.
func Load(path string, getenv func(string) string) ([]ServerConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("host tools: %w", err)
	}
	servers, err := Parse(raw, getenv)
	if err != nil {
		return nil, fmt.Errorf("host tools %s: %w", path, err)
	}
	return servers, nil
}

// Parse reads a host tools file's JSON (see Load).
func Parse(raw []byte, getenv func(string) string) ([]ServerConfig, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a host tools file: %w", err)
	}
	if len(f.Servers) == 0 {
		return nil, fmt.Errorf("no servers")
	}
	seen := map[string]bool{}
	for i := range f.Servers {
		s := &f.Servers[i]
		if err := s.check(getenv); err != nil {
			return nil, fmt.Errorf("server %d (%q): %w", i+1, s.Name, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("server %d: the name %q is used twice", i+1, s.Name)
		}
		seen[s.Name] = true
	}
	return f.Servers, nil
}

// check validates s and resolves its environment and timeout.
func (s *ServerConfig) check(getenv func(string) string) error {
	if err := mcpclient.CheckName(s.Name); err != nil {
		return err
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("set command or url, not both")
	case len(s.Command) == 0 && s.URL == "":
		return fmt.Errorf("set command (a stdio server) or url (a streamable-HTTP server)")
	case len(s.Command) > 0 && s.Command[0] == "":
		return fmt.Errorf("command: the program is empty")
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http or https URL", s.URL)
		}
		if len(s.Env) > 0 || len(s.EnvFrom) > 0 || s.Dir != "" {
			return fmt.Errorf("env, env_from and dir are for a command, not a url")
		}
	case len(s.Headers) > 0 || len(s.HeadersFrom) > 0:
		return fmt.Errorf("headers and headers_from are for a url, not a command")
	}
	var err error
	s.timeout, err = mcpclient.CheckOffer(s.Prefix, s.Timeout,
		mcpclient.Globs{Field: "tools", Globs: s.Tools}, mcpclient.Globs{Field: "images", Globs: s.Images},
		mcpclient.Globs{Field: "users", Globs: s.Users}, mcpclient.Globs{Field: "threads", Globs: s.Threads})
	if err != nil {
		return err
	}
	if err := resolve(&s.Env, s.EnvFrom, "env_from", getenv); err != nil {
		return err
	}
	if err := resolve(&s.Headers, s.HeadersFrom, "headers_from", getenv); err != nil {
		return err
	}
	s.secrets = nil
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			s.secrets = append(s.secrets, v)
			if _, tok, ok := strings.Cut(v, " "); ok { // "Bearer X": X alone too
				s.secrets = append(s.secrets, tok)
			}
		}
	}
	return nil
}

// resolve copies the bridge's variables named by from into *into.
func resolve(into *map[string]string, from map[string]string, field string, getenv func(string) string) error {
	for name, bridgeVar := range from {
		v := getenv(bridgeVar)
		if v == "" {
			return fmt.Errorf("%s: %s names %s, which is not set in the bridge's environment", field, name, bridgeVar)
		}
		if *into == nil {
			*into = map[string]string{}
		}
		if _, dup := (*into)[name]; dup {
			return fmt.Errorf("%s: %s is set twice", field, name)
		}
		(*into)[name] = v
	}
	return nil
}

// Scope is the thread a list or call is for.
type Scope struct {
	// Image, User and Thread are the thread's image reference, owner and
	// id, which the servers' limits match.
	Image, User, Thread string
	// Redact, when set, masks the thread's own secrets (its policy's) in
	// results, after the host's.
	Redact func(string) string
}

// allows reports whether the server's tools are offered in sc.
func (s *ServerConfig) allows(sc Scope) bool {
	return mcpclient.MatchAny(s.Images, sc.Image) && mcpclient.MatchAny(s.Users, sc.User) && mcpclient.MatchAny(s.Threads, sc.Thread)
}

// offers reports whether the server's tool called name is offered.
func (s *ServerConfig) offers(name string) bool { return mcpclient.MatchAny(s.Tools, name) }
