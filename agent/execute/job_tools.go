package execute

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/wire"
)

type jobOutput struct{ jobs *jobManager }

func (*jobOutput) Name() string { return "job_output" }

func (*jobOutput) Description() string {
	return "Show a background job's output (terminal escapes removed) and whether it is still running. " +
		"Without since, the last part of the output; with since, the output from that byte offset on " +
		"(the result names the offset to continue from)."
}

func (*jobOutput) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The job id, e.g. j3."},
    "since": {"type": "integer", "minimum": 0, "description": "Byte offset into the job's output to start at."}
  },
  "required": ["id"]
}`)
}

type jobArgs struct {
	ID    *string `json:"id"`
	Since *int64  `json:"since"`
	Input *string `json:"input"`
}

// fromCall decodes a job tool's arguments and finds the job they name;
// bad is the tool's answer when they do not (not JSON, no id, no such
// job).
func (m *jobManager) fromCall(call tool.Call) (j *job, args jobArgs, bad *tool.Result) {
	fail := func(r tool.Result) (*job, jobArgs, *tool.Result) { return nil, args, &r }
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return fail(tool.Failed("%v", err))
	}
	if args.ID == nil {
		return fail(tool.Missing("id"))
	}
	j, err := m.lookup(*args.ID)
	if err != nil {
		return fail(tool.Failed("%v", err))
	}
	return j, args, nil
}

// Run reads the job's output. It does not block beyond file reads.
func (t *jobOutput) Run(_ context.Context, call tool.Call) tool.Result {
	j, args, bad := t.jobs.fromCall(call)
	if bad != nil {
		return *bad
	}
	if args.Since != nil && *args.Since < 0 {
		return tool.Failed("since must be 0 or more, got %d", *args.Since)
	}
	return j.output(args.Since)
}

// output returns up to the job's limit of cleaned output from since (nil:
// the tail), with the job's state.
func (j *job) output(since *int64) tool.Result {
	j.mu.Lock()
	j.clean.FlushLine()
	total, lines, path := j.capture.total, j.capture.totalLines(), ""
	if j.file != nil {
		path = j.file.path
	}
	if j.keptPath != "" {
		path = j.keptPath
	}
	tail, _ := j.capture.text("")
	j.mu.Unlock()

	from := max(total-int64(j.limit), 0)
	if since != nil {
		from = min(*since, total)
	}
	n := min(total-from, int64(j.limit))
	text, from, n, ok := readLines(path, from, n, total, since == nil)
	if !ok && since == nil {
		text, from, n = tail, max(total-int64(len(tail)), 0), int64(len(tail))
	} else if !ok {
		return tool.Failed("the output from byte %d is no longer kept; call job_output without since for the latest", from)
	}
	res := tool.Result{Output: text, JobID: j.id, TotalBytes: total, TotalLines: lines, OutputPath: path,
		Truncated: from > 0 || from+n < total}
	state, code := j.state()
	res.Status, res.ExitCode = state, code
	if state == wire.StatusOOMKilled {
		j.mu.Lock()
		res.Err = j.oom
		j.mu.Unlock()
	}
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		res.Output += "\n"
	}
	res.Output += fmt.Sprintf("[job %s %s; bytes %d-%d of %d; next since=%d]", j.id, j.describeState(), from, from+n, total, from+n)
	return res
}

// readLines reads n bytes at off from the file at path (of total bytes),
// moved to line boundaries where the page holds one to move to: the end
// back to the last newline unless the page reaches the end of the output,
// and, with alignStart, the start past the first newline unless off begins
// a line. It returns the text and the offset and length it covers.
func readLines(path string, off, n, total int64, alignStart bool) (string, int64, int64, bool) {
	extra := int64(0) // the byte before off, to know whether off begins a line
	if alignStart && off > 0 {
		extra = 1
	}
	b, ok := readAt(path, off-extra, n+extra)
	if !ok {
		return "", off, n, false
	}
	if extra == 1 {
		prev := b[0]
		b = b[1:]
		if i := bytes.IndexByte(b, '\n'); prev != '\n' && i >= 0 && i+1 < len(b) {
			off, b = off+int64(i+1), b[i+1:]
		}
	}
	if off+int64(len(b)) < total && len(b) > 0 && b[len(b)-1] != '\n' {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	b = tool.TrimPartialRune(b)
	n = int64(len(b))
	return strings.ToValidUTF8(string(b), "\uFFFD"), off, n, true
}

// readAt reads n bytes at off from the file at path.
func readAt(path string, off, n int64) ([]byte, bool) {
	if path == "" {
		return nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF || int64(k) < n {
		return nil, false
	}
	return buf[:k], true
}

// state returns the job's status and, once it ended, its exit code.
func (j *job) state() (string, *int) {
	if !j.hasEnded() {
		return wire.StatusBackground, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	code := j.code
	switch {
	case j.stopReason != "":
		return j.stopReason, &code
	case j.oom != "":
		return wire.StatusOOMKilled, &code
	}
	return wire.StatusExited, &code
}

func (j *job) describeState() string {
	status, code := j.state()
	if code == nil {
		if j.proc.AwaitingInput() {
			return "is running, waiting for input"
		}
		return "is running"
	}
	return fmt.Sprintf("ended (%s, exit code %d)", status, *code)
}

type jobWrite struct{ jobs *jobManager }

func (*jobWrite) Name() string { return "job_write" }

func (*jobWrite) Description() string {
	return "Type input into a background job's terminal, e.g. an answer to a prompt. Include \\n to " +
		"press Enter. Returns the job's output after a short pause."
}

func (*jobWrite) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The job id."},
    "input": {"type": "string", "description": "The text to type; \\n presses Enter."}
  },
  "required": ["id", "input"]
}`)
}

// writeSettle is how long job_write waits for the job to answer.
const writeSettle = 500 * time.Millisecond

// Run writes the input and returns the output that followed. It blocks for
// writeSettle, or less if the job ends or ctx ends.
func (t *jobWrite) Run(ctx context.Context, call tool.Call) tool.Result {
	j, args, bad := t.jobs.fromCall(call)
	if bad != nil {
		return *bad
	}
	if args.Input == nil {
		return tool.Missing("input")
	}
	if j.hasEnded() {
		return tool.Failed("job %s has ended; nothing reads its input", j.id)
	}
	j.mu.Lock()
	before := j.capture.total
	j.mu.Unlock()
	if _, err := j.proc.Write([]byte(*args.Input)); err != nil {
		return tool.Failed("write to job %s: %v", j.id, err)
	}
	select {
	case <-time.After(writeSettle):
	case <-j.done:
	case <-ctx.Done():
	}
	res := j.output(&before)
	res.Output = fmt.Sprintf("wrote %d bytes to job %s\n%s", len(*args.Input), j.id, res.Output)
	return res
}

type jobKill struct{ jobs *jobManager }

func (*jobKill) Name() string { return "job_kill" }

func (*jobKill) Description() string {
	return "Stop a background job and everything it started (SIGTERM, then SIGKILL), and show the end of its output."
}

func (*jobKill) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {"id": {"type": "string", "description": "The job id."}},
  "required": ["id"]
}`)
}

// Run kills the job; it blocks until the job's processes are gone.
func (t *jobKill) Run(_ context.Context, call tool.Call) tool.Result {
	j, _, bad := t.jobs.fromCall(call)
	if bad != nil {
		return *bad
	}
	already := j.hasEnded()
	j.kill(wire.StatusKilled)
	res := j.output(nil)
	if already {
		res.Output = fmt.Sprintf("job %s had already ended\n%s", j.id, res.Output)
	} else {
		res.Output = fmt.Sprintf("killed job %s\n%s", j.id, res.Output)
	}
	return res
}

type jobList struct{ jobs *jobManager }

func (*jobList) Name() string { return "jobs" }

func (*jobList) Description() string {
	return "List the background jobs: id, state, run time, output size and command."
}

func (*jobList) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {}}`)
}

// Run lists the jobs. It does not block.
func (t *jobList) Run(context.Context, tool.Call) tool.Result {
	all := t.jobs.list()
	if len(all) == 0 {
		return tool.Result{Output: "no background jobs"}
	}
	var b strings.Builder
	for _, j := range all {
		j.mu.Lock()
		total, end := j.capture.total, j.ended
		j.mu.Unlock()
		if end.IsZero() {
			end = time.Now()
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%d bytes\t%s\n", j.id, j.describeState(),
			end.Sub(j.started).Round(time.Second), total, tool.OneLine(j.command, 120))
	}
	return tool.Result{Output: strings.TrimSuffix(b.String(), "\n")}
}
