package execute

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/boxwire/boxwire/agent/tool"
)

// Defaults used when a Config field is zero.
const (
	DefaultWorkspace   = "/workspace"
	DefaultExecTimeout = 120 * time.Second
	// DefaultMaxExecTimeout is the largest timeout argument execute takes
	// when Config.MaxExecTimeout is zero.
	DefaultMaxExecTimeout = 10 * time.Minute
	DefaultOutputLimit    = 30 << 10
	DefaultOutputDir      = "/tmp/boxwire/output"
	DefaultOutputDirLimit = 64 << 20
	DefaultInputIdle      = 3 * time.Second
	DefaultKillGrace      = 500 * time.Millisecond
)

// Config configures the command tools. The zero value is usable.
type Config struct {
	// Workspace is the directory commands start in; empty means
	// DefaultWorkspace.
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
	// OutputDir holds the full output of commands; empty means
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
	// MemoryCgroup is the directory of the sandbox's memory cgroup (cgroup
	// v2, or v1's memory controller): a command that dies of SIGKILL while
	// its OOM kill count (memory.events' oom_kill, v1 memory.oom_control's)
	// grows gets status oom_killed and an error naming the limit
	// (memory.max, v1 memory.limit_in_bytes). DefaultMemoryCgroup (empty)
	// finds the agent's own; NoMemoryCgroup turns the check off.
	MemoryCgroup string
	// Logger receives warnings about the output directory; nil discards
	// them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Workspace == "" {
		c.Workspace = DefaultWorkspace
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = DefaultExecTimeout
	}
	if c.MaxExecTimeout <= 0 {
		c.MaxExecTimeout = DefaultMaxExecTimeout
	}
	c.ExecTimeout = min(c.ExecTimeout, c.MaxExecTimeout)
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.OutputDir == "" {
		c.OutputDir = DefaultOutputDir
	}
	if c.OutputDirLimit <= 0 {
		c.OutputDirLimit = DefaultOutputDirLimit
	}
	if c.InputIdle <= 0 {
		c.InputIdle = DefaultInputIdle
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Runner owns the commands the tools start: foreground ones while their
// call waits, background jobs until they end, are killed, or Close is
// called. It is safe for concurrent use.
type Runner struct {
	jobs  *jobManager
	tools []tool.Tool
}

// New returns a Runner configured by cfg. It starts nothing and does not
// touch the filesystem; a missing workspace shows up in the calls'
// results. Call Close when done to kill background jobs.
func New(cfg Config) *Runner {
	cfg = cfg.withDefaults()
	root, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		root = filepath.Clean(cfg.Workspace)
	}
	outDir, err := filepath.Abs(cfg.OutputDir)
	if err != nil {
		outDir = filepath.Clean(cfg.OutputDir)
	}
	env := childEnv(cfg.Env)
	jobs := &jobManager{
		store:  &outputStore{dir: outDir, limit: cfg.OutputDirLimit, log: cfg.Logger, inUse: map[string]bool{}},
		limit:  cfg.OutputLimit,
		grace:  cfg.KillGrace,
		env:    env,
		memory: &shellMemory{dir: filepath.Join(filepath.Dir(outDir), "shell")},
		cgroup: findMemoryCgroup(cfg.MemoryCgroup),
		home:   envValue(env, "HOME"),
		cols:   execCols,
		rows:   execRows,
		jobs:   map[string]*job{},
		quit:   make(chan struct{}),
	}
	return &Runner{jobs: jobs, tools: []tool.Tool{
		&executeTool{workspace: root, jobs: jobs, timeout: cfg.ExecTimeout, maxTimeout: cfg.MaxExecTimeout, inputIdle: cfg.InputIdle},
		&jobOutput{jobs: jobs},
		&jobWrite{jobs: jobs},
		&jobKill{jobs: jobs},
		&jobList{jobs: jobs},
	}}
}

// Tools returns the command tools: execute, job_output, job_write,
// job_kill and jobs. The slice is the caller's.
func (r *Runner) Tools() []tool.Tool {
	return append([]tool.Tool(nil), r.tools...)
}

// Close kills every running command (foreground and background) with its
// process group and waits until they are gone; later commands are refused.
// It blocks for about the kill grace period at most, and is idempotent.
func (r *Runner) Close() {
	r.jobs.Close()
}
