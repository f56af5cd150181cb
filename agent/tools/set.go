package tools

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/execute"
)

// Defaults used when a Config field is zero.
const (
	DefaultWorkspace   = execute.DefaultWorkspace
	DefaultExecTimeout = execute.DefaultExecTimeout
	// DefaultMaxExecTimeout is the largest timeout argument execute takes
	// when Config.MaxExecTimeout is zero.
	DefaultMaxExecTimeout = execute.DefaultMaxExecTimeout
	DefaultOutputLimit    = execute.DefaultOutputLimit
	DefaultOutputDir      = execute.DefaultOutputDir
	DefaultOutputDirLimit = execute.DefaultOutputDirLimit
	DefaultInputIdle      = execute.DefaultInputIdle
	DefaultKillGrace      = execute.DefaultKillGrace
)

// DefaultSandboxRoots is Config.SandboxRoots's default: the sandbox's /tmp.
var DefaultSandboxRoots = []string{"/tmp"}

// MaxExecTimeout is kept for callers of the skeleton's API; it equals
// DefaultMaxExecTimeout.
const MaxExecTimeout = DefaultMaxExecTimeout

// Config configures the tools. The zero value is usable.
type Config struct {
	// Workspace is the directory the tools work in and are confined to;
	// empty means DefaultWorkspace.
	Workspace string
	// ExecTimeout is execute's default timeout; a call's own timeout
	// argument replaces it. Zero means DefaultExecTimeout.
	ExecTimeout time.Duration
	// MaxExecTimeout is the largest timeout a call may ask for; larger
	// ones are refused. Zero means DefaultMaxExecTimeout.
	MaxExecTimeout time.Duration
	// OutputLimit is how many bytes of output the model sees from one call;
	// zero means DefaultOutputLimit.
	OutputLimit int
	// OutputDir holds the full output of commands (read_file may read it,
	// read-only, though it is outside the workspace); empty means
	// DefaultOutputDir. OutputDirLimit bounds its total size, oldest files
	// going first; zero means DefaultOutputDirLimit. The remembered shell's
	// per-command files go in the folder "shell" beside it.
	OutputDir      string
	OutputDirLimit int64
	// Env is extra environment for commands (e.g. HTTP_PROXY), laid over
	// the allowlisted variables and non-interactive defaults. Commands
	// never inherit the rest of the agent's environment.
	Env []string
	// InputIdle is how long a command must be silent, blocked reading its
	// terminal, before execute returns with status awaiting_input; zero
	// means DefaultInputIdle.
	InputIdle time.Duration
	// KillGrace is how long a stopped command's process group has between
	// SIGTERM and SIGKILL; zero means DefaultKillGrace.
	KillGrace time.Duration
	// SandboxRoots are folders outside the workspace that a direct call
	// (run_tool) may name by absolute path when its arguments carry
	// "sandbox_paths": true — places in the sandbox itself, like its /tmp
	// tmpfs; nil means DefaultSandboxRoots, an empty non-nil slice none.
	SandboxRoots []string
	// MemoryCgroup is the sandbox's memory cgroup directory, for telling
	// a command the OOM killer ended (execute.Config.MemoryCgroup); empty
	// means the agent's own.
	MemoryCgroup string
	// NoRipgrep makes grep use its Go search even when rg is in PATH.
	NoRipgrep bool
	// Logger receives debug logs of tool runs; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Workspace == "" {
		c.Workspace = DefaultWorkspace
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.OutputDir == "" {
		c.OutputDir = DefaultOutputDir
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SandboxRoots == nil {
		c.SandboxRoots = DefaultSandboxRoots
	}
	return c
}

// Set is the collection of tools offered to the model. Its tools are safe
// for concurrent use. Background jobs started through it run until they
// end, are killed, or Close is called.
type Set struct {
	byName   map[string]Tool
	sorted   []Tool
	commands *execute.Runner
}

// New returns the tools configured by cfg. It starts nothing and does not
// touch the filesystem; a missing workspace shows up in the calls'
// results. Call Close when done to kill background jobs.
func New(cfg Config) *Set {
	cfg = cfg.withDefaults()
	root, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		root = filepath.Clean(cfg.Workspace)
	}
	outDir, err := filepath.Abs(cfg.OutputDir)
	if err != nil {
		outDir = filepath.Clean(cfg.OutputDir)
	}
	ws := workspace{root: root, readOnly: outDir}
	for _, r := range cfg.SandboxRoots {
		if filepath.IsAbs(r) {
			ws.extra = append(ws.extra, filepath.Clean(r))
		}
	}
	commands := execute.New(execute.Config{
		Workspace:      root,
		ExecTimeout:    cfg.ExecTimeout,
		MaxExecTimeout: cfg.MaxExecTimeout,
		OutputLimit:    cfg.OutputLimit,
		OutputDir:      outDir,
		OutputDirLimit: cfg.OutputDirLimit,
		Env:            cfg.Env,
		InputIdle:      cfg.InputIdle,
		KillGrace:      cfg.KillGrace,
		MemoryCgroup:   cfg.MemoryCgroup,
		Logger:         cfg.Logger,
	})
	g := make(gate, MaxBlockingCalls) // gate.go
	all := append(commands.Tools(),
		gated{&readFile{ws: ws, limit: cfg.OutputLimit}, g},
		gated{&writeFile{ws: ws}, g},
		gated{&editFile{ws: ws}, g},
		gated{&deleteTool{ws: ws}, g},
		gated{&ls{ws: ws, limit: cfg.OutputLimit}, g},
		gated{&glob{ws: ws, limit: cfg.OutputLimit}, g},
		gated{&grep{ws: ws, limit: cfg.OutputLimit, noRipgrep: cfg.NoRipgrep}, g},
	)
	slices.SortFunc(all, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
	s := &Set{byName: make(map[string]Tool, len(all)), sorted: all, commands: commands}
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

// Close kills every running command (foreground and background) with its
// process group and waits until they are gone; later commands are refused.
// It blocks for about the kill grace period at most, and is idempotent.
func (s *Set) Close() error {
	s.commands.Close()
	return nil
}
