package execute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Terminal size for commands: wide, so tools that format for the terminal
// width (ls, tables, progress bars) rarely wrap.
const (
	execCols = 160
	execRows = 48
)

// pollInterval is how often a running command is checked for waiting on
// input.
const pollInterval = 200 * time.Millisecond

// executeTool is the execute tool.
type executeTool struct {
	workspace  string // absolute
	jobs       *jobManager
	timeout    time.Duration
	maxTimeout time.Duration
	inputIdle  time.Duration
}

func (*executeTool) Name() string { return "execute" }

func (e *executeTool) Description() string {
	return fmt.Sprintf("Run a shell command with bash -lc in the workspace (%s) on a terminal and return its "+
		"combined stdout and stderr and its exit code. Stdin is empty: pass flags such as -y. The command and "+
		"everything it started are killed when it times out (default %ds, at most %ds). If it stops and waits "+
		"for typed input, the call returns at once with status awaiting_input and a job id: answer with "+
		"job_write or stop it with job_kill. For servers and other long-running commands pass background=true "+
		"and follow them with job_output. Long output is cut in the middle; the result then names a file with "+
		"the full output that read_file can page through. The shell remembers: the working directory and exported "+
		"variables a command leaves carry over to the next command (the result's cwd says where it is); pass "+
		"fresh=true for a command that starts in the workspace with the default environment and changes nothing "+
		"for later ones.",
		e.workspace, int(e.timeout.Seconds()), int(e.maxTimeout.Seconds()))
}

func (*executeTool) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The bash command line to run."},
    "timeout": {"type": "integer", "minimum": 1, "description": "Timeout in seconds."},
    "background": {"type": "boolean", "description": "Start the command as a background job and return its id at once."},
    "fresh": {"type": "boolean", "description": "Run in a new shell in the workspace, ignoring and keeping the directory and exports earlier commands left."}
  },
  "required": ["command"]
}`)
}

type executeArgs struct {
	Command    *string `json:"command"`
	Timeout    *int    `json:"timeout"`
	Background bool    `json:"background"`
	Fresh      bool    `json:"fresh"`
}

// Run runs the command on a PTY, streaming its output to call.Output. It
// blocks until the command has exited and been cleaned up, its timeout
// passed or ctx ended (the command is then killed), or it waits for input
// (it then goes on as a background job); with background=true it returns
// once the command started.
func (e *executeTool) Run(ctx context.Context, call tool.Call) tool.Result {
	var args executeArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	if args.Command == nil || strings.TrimSpace(*args.Command) == "" {
		return tool.Missing("command")
	}
	timeout := e.timeout
	if args.Timeout != nil {
		if *args.Timeout <= 0 {
			return tool.Failed("timeout must be a positive number of seconds, got %d", *args.Timeout)
		}
		timeout = time.Duration(*args.Timeout) * time.Second
		if timeout > e.maxTimeout {
			return tool.Failed("timeout %ds is above the maximum of %ds; use background=true for long-running commands",
				*args.Timeout, int(e.maxTimeout.Seconds()))
		}
	}
	dir, err := filepath.EvalSymlinks(e.workspace)
	if err != nil {
		return tool.Failed("workspace %s: %v", e.workspace, err)
	}
	stream := call.Output
	if args.Background {
		stream = nil
	}
	thread := threadOf(ctx)
	var sc *shellCall
	if !args.Fresh {
		// A background job starts where the shell is but does not move it.
		if sc, err = e.jobs.memory.prepare(thread, *args.Command, !args.Background); err != nil {
			return tool.Failed("%v", err)
		}
	}
	j, err := e.jobs.start(*args.Command, sc, dir, stream)
	if _, ok := errors.AsType[*stateFileError](err); ok {
		return tool.Failed("%v", err)
	} else if err != nil {
		return tool.Failed("start command: %v", err)
	}
	if args.Background {
		j.detach()
		return e.withCwd(tool.Result{Status: wire.StatusBackground, JobID: j.id,
			Output: fmt.Sprintf("started background job %s; follow it with job_output(id=%q), stop it with job_kill", j.id, j.id)},
			sc, thread, dir)
	}
	defer e.jobs.forget(j)
	res := e.wait(ctx, j, timeout)
	if sc != nil && j.hasEnded() {
		j.mu.Lock()
		res.Cwd = j.cwd
		j.mu.Unlock()
	}
	return e.withCwd(res, sc, thread, dir)
}

// withCwd sets res.Cwd, when the call ran in the remembered shell (sc not
// nil) and it is not set yet, to where the thread's next command starts.
func (e *executeTool) withCwd(res tool.Result, sc *shellCall, thread, workspace string) tool.Result {
	if sc == nil || res.Cwd != "" {
		return res
	}
	if res.Cwd = e.jobs.memory.cwd(thread); res.Cwd == "" {
		res.Cwd = workspace
	}
	return res
}

// wait follows a foreground job until it ends, times out, is interrupted
// or waits for input.
func (e *executeTool) wait(ctx context.Context, j *job, timeout time.Duration) tool.Result {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-j.done:
			return j.result()
		case <-ctx.Done():
			j.kill(wire.StatusInterrupted)
			return j.result()
		case <-timer.C:
			j.kill(wire.StatusTimedOut)
			res := j.result()
			res.Err = fmt.Sprintf("command timed out after %s; it and its child processes were killed", timeout)
			return res
		case <-tick.C:
			if j.idleFor() >= e.inputIdle && j.proc.AwaitingInput() {
				j.detach()
				return j.snapshot(wire.StatusAwaitingInput, fmt.Sprintf(
					"the command is waiting for input on its terminal; it goes on as background job %s: "+
						"answer with job_write(id=%q, input=...) (end lines with \\n) or stop it with job_kill", j.id, j.id))
			}
		}
	}
}

// result describes an ended job.
func (j *job) result() tool.Result {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	text, truncated := j.capture.text(j.keptPath)
	code := j.code
	res := tool.Result{
		Output:     text,
		ExitCode:   &code,
		Status:     wire.StatusExited,
		Truncated:  truncated,
		TotalBytes: j.capture.total,
		TotalLines: j.capture.totalLines(),
		OutputPath: j.keptPath,
	}
	switch {
	case j.stopReason == wire.StatusInterrupted:
		res.Status, res.Err = wire.StatusInterrupted, "interrupted: the command and its child processes were killed"
	case j.stopReason != "":
		res.Status = j.stopReason
	case j.oom != "":
		res.Status, res.Err = wire.StatusOOMKilled, j.oom
	case j.waitErr != nil && !errors.Is(j.waitErr, context.Canceled):
		res.Err = fmt.Sprintf("wait for command: %v", j.waitErr)
	}
	return res
}

// snapshot describes a job that is still running, with its output so far.
func (j *job) snapshot(status, note string) tool.Result {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clean.FlushLine()
	path := ""
	if j.file != nil {
		path = j.file.path
	}
	text, truncated := j.capture.text(path)
	res := tool.Result{
		Output:     text,
		Status:     status,
		JobID:      j.id,
		Truncated:  truncated,
		TotalBytes: j.capture.total,
		TotalLines: j.capture.totalLines(),
		OutputPath: path,
	}
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		res.Output += "\n"
	}
	res.Output += "[" + note + "]"
	return res
}
