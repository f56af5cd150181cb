package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/files"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/agent/tools"
)

// options is the agent's configuration from its flags, whose defaults come
// from the environment. The bridge sets only the connection variables;
// the loop and tool limits are the operator's, baked into the image
// (ENV or CMD of an image built FROM boxwire).
type options struct {
	listen, token, workspace, model, llmSocket string

	termIdle     time.Duration
	maxFileBytes int64
	showVersion  bool

	// loop holds the limits of the tool loop (MaxSteps, Budget); zero
	// fields mean loop's defaults.
	loop loop.Config
	// tools holds the limits of the tools (timeouts, output sizes); zero
	// fields mean tools' defaults.
	tools tools.Config
}

// parseOptions reads args over defaults from getenv. A limit variable
// that is set but not a valid value is an error (the agent would
// otherwise run with a limit the operator did not mean); flag errors and
// -h are reported on stderr.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", env("BOXWIRE_LISTEN", "0.0.0.0:8080"), "unix:/path or host:port ($BOXWIRE_LISTEN)")
	token, err := secret(getenv, "BOXWIRE_TOKEN") // secrets.go
	if err != nil {
		return options{}, err
	}
	fs.StringVar(&o.token, "token", token, "bearer token clients must send; required on TCP ($BOXWIRE_TOKEN, or a file named by $BOXWIRE_TOKEN_FILE)")
	fs.StringVar(&o.workspace, "workspace", env("BOXWIRE_WORKSPACE", "/workspace"), "the directory the tools work in ($BOXWIRE_WORKSPACE)")
	fs.StringVar(&o.model, "model", env("BOXWIRE_MODEL", loop.DefaultModel), "model name ($BOXWIRE_MODEL)")
	fs.StringVar(&o.llmSocket, "llm-socket", getenv("BOXWIRE_LLM_SOCKET"), "unix socket of the bridge's LLM proxy ($BOXWIRE_LLM_SOCKET)")
	fs.DurationVar(&o.termIdle, "terminal-idle", envDuration(getenv, "BOXWIRE_TERMINAL_IDLE", terminal.DefaultIdleTimeout), "close a terminal session after this long without watchers, input or output ($BOXWIRE_TERMINAL_IDLE)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	o.maxFileBytes = maxFileBytes(getenv)

	l := limitVars{fs: fs, getenv: getenv}
	l.int(&o.loop.MaxSteps, "max-steps", "BOXWIRE_MAX_STEPS", loop.DefaultMaxSteps, "model calls one turn may make")
	l.int(&o.loop.Budget, "context-budget", "BOXWIRE_CONTEXT_BUDGET", loop.DefaultBudget, "conversation size in approximate tokens past which the oldest tool outputs are shortened in requests")
	l.duration(&o.tools.ExecTimeout, "exec-timeout", "BOXWIRE_EXEC_TIMEOUT", tools.DefaultExecTimeout, "execute's timeout when the call names none")
	l.duration(&o.tools.MaxExecTimeout, "max-exec-timeout", "BOXWIRE_MAX_EXEC_TIMEOUT", tools.DefaultMaxExecTimeout, "the largest timeout a call may ask for")
	l.duration(&o.tools.InputIdle, "input-idle", "BOXWIRE_INPUT_IDLE", tools.DefaultInputIdle, "how long a command waits silently for input before execute returns awaiting_input")
	var outputLimit, outputDirLimit byteSize
	l.bytes(&outputLimit, "output-limit", "BOXWIRE_OUTPUT_LIMIT", tools.DefaultOutputLimit, "output bytes of one tool call the model sees (the rest is kept in a file)")
	l.bytes(&outputDirLimit, "output-dir-limit", "BOXWIRE_OUTPUT_DIR_LIMIT", tools.DefaultOutputDirLimit, "total bytes of kept full outputs, oldest removed first")
	if err := errors.Join(l.errs...); err != nil {
		return options{}, err
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.tools.OutputLimit, o.tools.OutputDirLimit = int(outputLimit), int64(outputDirLimit)
	if o.tools.ExecTimeout > o.tools.MaxExecTimeout {
		return options{}, fmt.Errorf("--exec-timeout %s is above --max-exec-timeout %s", o.tools.ExecTimeout, o.tools.MaxExecTimeout)
	}
	return o, nil
}

// limitVars defines the limit flags: each defaults to its variable when
// set, or to the package default; invalid variables gather in errs.
type limitVars struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// usage is a limit flag's help text.
func usage(help, key string) string { return help + " ($" + key + ")" }

func (l *limitVars) int(p *int, name, key string, def int, help string) {
	*p = def
	if v := l.getenv(key); v != "" {
		if err := (*positiveInt)(p).Set(v); err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s=%q: %w", key, v, err))
		}
	}
	l.fs.Var((*positiveInt)(p), name, usage(help, key))
}

func (l *limitVars) duration(p *time.Duration, name, key string, def time.Duration, help string) {
	*p = def
	if v := l.getenv(key); v != "" {
		if err := (*positiveDuration)(p).Set(v); err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s=%q: %w", key, v, err))
		}
	}
	l.fs.Var((*positiveDuration)(p), name, usage(help, key))
}

func (l *limitVars) bytes(p *byteSize, name, key string, def int64, help string) {
	*p = byteSize(def)
	if v := l.getenv(key); v != "" {
		if err := p.Set(v); err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s=%q: %w", key, v, err))
		}
	}
	l.fs.Var(p, name, usage(help, key))
}

// errNotPositive is the error of a limit that is zero or negative.
var errNotPositive = errors.New("must be more than zero")

// positiveInt is a flag.Value of an int above zero.
type positiveInt int

func (p *positiveInt) String() string { return strconv.Itoa(int(*p)) }

func (p *positiveInt) Set(s string) error {
	n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	if n <= 0 {
		return errNotPositive
	}
	*p = positiveInt(n)
	return nil
}

// positiveDuration is a flag.Value of a duration above zero.
type positiveDuration time.Duration

func (p *positiveDuration) String() string { return time.Duration(*p).String() }

func (p *positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration such as 90s or 10m")
	}
	if d <= 0 {
		return errNotPositive
	}
	*p = positiveDuration(d)
	return nil
}

// byteSize is a flag.Value of a size in bytes above zero: a whole number,
// optionally with a binary suffix K, M or G (KiB, MiB, GiB also read).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	num, unit := strings.TrimSpace(s), int64(1)
	upper := strings.ToUpper(num)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(upper, u.suffix) {
			num, unit = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return fmt.Errorf("not a size such as 32768, 32K or 64M")
	}
	if n <= 0 {
		return errNotPositive
	}
	if n > (1<<62)/unit {
		return fmt.Errorf("too large")
	}
	*b = byteSize(n * unit)
	return nil
}

// envDuration reads a duration from key, or def when unset or invalid.
func envDuration(getenv func(string) string, key string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(getenv(key))
	if err != nil || d <= 0 {
		return def
	}
	return d
}

// maxFileBytes reads BOXWIRE_MAX_FILE_BYTES, the largest file an upload may
// write (files.DefaultMaxFileBytes when unset or not a positive number).
func maxFileBytes(getenv func(string) string) int64 {
	n, err := strconv.ParseInt(getenv("BOXWIRE_MAX_FILE_BYTES"), 10, 64)
	if err != nil || n <= 0 {
		return files.DefaultMaxFileBytes
	}
	return n
}
