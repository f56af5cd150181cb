package tools

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults used when a Config field is zero.
const (
	DefaultWorkspace   = "/workspace"
	DefaultExecTimeout = 120 * time.Second
	// MaxExecTimeout caps the per-call timeout argument of execute.
	MaxExecTimeout     = 10 * time.Minute
	DefaultOutputLimit = 30 << 10
)

// Config configures the tools. The zero value is usable.
type Config struct {
	// Workspace is the directory the tools work in and are confined to;
	// empty means DefaultWorkspace.
	Workspace string
	// ExecTimeout is execute's default timeout; a call's own timeout
	// argument replaces it, up to MaxExecTimeout. Zero means
	// DefaultExecTimeout.
	ExecTimeout time.Duration
	// OutputLimit is how many bytes of output the model sees from one call;
	// zero means DefaultOutputLimit.
	OutputLimit int
	// Logger receives debug logs of tool runs; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Workspace == "" {
		c.Workspace = DefaultWorkspace
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = DefaultExecTimeout
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Set is the collection of tools offered to the model. It is immutable and
// safe for concurrent use.
type Set struct {
	byName map[string]Tool
	sorted []Tool
}

// New returns the tools configured by cfg. It does not touch the
// filesystem; a missing workspace shows up in the calls' results.
func New(cfg Config) *Set {
	cfg = cfg.withDefaults()
	root, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		root = filepath.Clean(cfg.Workspace)
	}
	ws := workspace{root: root}
	all := []Tool{
		&execute{ws: ws, timeout: cfg.ExecTimeout, limit: cfg.OutputLimit, log: cfg.Logger},
		&readFile{ws: ws, limit: cfg.OutputLimit},
		&writeFile{ws: ws},
	}
	slices.SortFunc(all, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
	s := &Set{byName: make(map[string]Tool, len(all)), sorted: all}
	for _, t := range all {
		s.byName[t.Name()] = t
	}
	return s
}

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (Tool, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// All returns every tool, sorted by name. The slice is the caller's.
func (s *Set) All() []Tool {
	return slices.Clone(s.sorted)
}
