package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
)

// Terminal size for commands: wide, so tools that format for the terminal
// width (ls, tables, progress bars) rarely wrap.
const (
	execCols = 160
	execRows = 48
)

// execEnv is laid over the agent's environment for every command so that
// nothing waits for a human: pagers print straight through, git and package
// managers never prompt, editors exit at once, and tools that check CI pick
// their non-interactive mode. TERM matches the PTY the command runs on.
var execEnv = []string{
	"TERM=xterm-256color",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"MANPAGER=cat",
	"SYSTEMD_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=true",
	"EDITOR=true",
	"VISUAL=true",
	"DEBIAN_FRONTEND=noninteractive",
	"PIP_NO_INPUT=1",
	"CI=1",
}

// errTimedOut is the cause given to a command's context when its timeout
// passes, to tell a timeout from an interrupted turn.
var errTimedOut = errors.New("command timed out")

type execute struct {
	ws      workspace
	timeout time.Duration
	limit   int
	log     *slog.Logger
}

func (*execute) Name() string { return "execute" }

func (e *execute) Description() string {
	return fmt.Sprintf("Run a shell command with bash -c in the workspace (%s) and return its combined "+
		"stdout and stderr and its exit code. Stdin is /dev/null: the command cannot ask for input, so pass "+
		"flags such as -y. The command and everything it started are killed when it times out "+
		"(default %ds, at most %ds) and when it finishes, so do not use it to start servers that must keep "+
		"running. Long output is cut in the middle.",
		e.ws.root, int(e.timeout.Seconds()), int(MaxExecTimeout.Seconds()))
}

func (*execute) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The bash command line to run."},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Timeout in seconds."}
  },
  "required": ["command"]
}`)
}

type executeArgs struct {
	Command *string `json:"command"`
	Timeout *int    `json:"timeout"`
}

// Run runs the command on a PTY, streaming its output to call.Output, and
// blocks until it has exited and been cleaned up.
func (e *execute) Run(ctx context.Context, call Call) Result {
	var args executeArgs
	if err := decodeArgs(call.Args, &args); err != nil {
		return failed("%v", err)
	}
	if args.Command == nil || strings.TrimSpace(*args.Command) == "" {
		return missing("command")
	}
	timeout := e.timeout
	if args.Timeout != nil {
		if *args.Timeout <= 0 {
			return failed("timeout must be a positive number of seconds, got %d", *args.Timeout)
		}
		timeout = min(time.Duration(*args.Timeout)*time.Second, MaxExecTimeout)
	}
	dir, err := e.ws.resolve(".")
	if err != nil {
		return failed("%v", err)
	}

	runCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	out := newCapture(e.limit)
	proc, err := shell.Start(runCtx, shell.Spec{
		Command: []string{"bash", "-c", *args.Command},
		Dir:     dir,
		Env:     mergeEnv(os.Environ(), execEnv),
		Cols:    execCols,
		Rows:    execRows,
		Stdin:   shell.StdinNull,
		Output:  &tee{capture: out, stream: call.Output},
	})
	if err != nil {
		return failed("%v", err)
	}
	began := time.Now()
	code, waitErr := proc.Wait()
	closeErr := proc.Close() // kills what the command left in its group
	e.log.Debug("execute", "call", call.ID, "exit", code, "took", time.Since(began),
		"bytes", out.total, "wait_err", waitErr, "close_err", closeErr)

	text, truncated := out.text()
	res := Result{Output: text, ExitCode: &code, Truncated: truncated}
	if truncated {
		res.TotalBytes = out.total
	}
	switch {
	case errors.Is(waitErr, errTimedOut):
		res.Err = fmt.Sprintf("command timed out after %s; it and its child processes were killed", timeout)
	case waitErr != nil && ctx.Err() != nil:
		res.Err = "interrupted: the command and its child processes were killed"
	case waitErr != nil:
		res.Err = fmt.Sprintf("wait for command: %v", waitErr)
	}
	return res
}

// tee records output for the result and streams it to the caller.
type tee struct {
	capture *capture
	stream  func([]byte)
}

func (t *tee) Write(p []byte) (int, error) {
	_, _ = t.capture.Write(p)
	if t.stream != nil {
		t.stream(p)
	}
	return len(p), nil
}

// mergeEnv returns base with the variables of over set, replacing any of
// the same name.
func mergeEnv(base, over []string) []string {
	names := make(map[string]bool, len(over))
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			env = append(env, kv)
		}
	}
	return append(env, over...)
}
