package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Texts the model reads when a call could not run to completion.
const (
	msgInterrupted       = "interrupted by the user"
	msgInterruptedBefore = "not run: the turn was interrupted before this call started"
	msgNoOutput          = "(no output)"
	msgNotAllowed        = "not run: "
)

// runCall announces, runs and reports one tool call, and answers it in the
// history. It never returns without adding the tool message.
func (l *Loop) runCall(ctx context.Context, conv *Conversation, ts toolset, call ToolCall, emit func(wire.Envelope)) {
	res := l.call(ctx, ts, call, emit, true)
	conv.Append(Message{Role: RoleTool, ToolCallID: call.ID, Content: modelText(res)})
}

// Direct announces, runs and reports one tool call that a person asked for
// (a run_tool request), outside any conversation: it emits tool_call, the
// tool's tool_output chunks and tool_result (without thread, id or seq), and
// returns the result. Unlike the model's calls it is not put to
// Config.Check: the person asking is the one who would approve it (the
// bridge's enforced egress and credential rules still apply to what it
// does). It blocks until the tool is done or ctx ends (the tool is then
// stopped).
func (l *Loop) Direct(ctx context.Context, call ToolCall, emit func(wire.Envelope)) tools.Result {
	ts := toolset{byName: l.tools, defs: l.defs}
	if _, builtIn := l.tools[call.Name]; !builtIn { // a name Tools has wins: nothing to ask for (toolsFor)
		ts = l.toolsFor(ctx)
	}
	return l.call(ctx, ts, call, emit, false)
}

// call announces, runs and reports one tool call; checked puts it to
// Config.Check first.
func (l *Loop) call(ctx context.Context, ts toolset, call ToolCall, emit func(wire.Envelope), checked bool) tools.Result {
	emit(wire.MustNew(wire.TypeToolCall, "", "", wire.ToolCall{
		CallID:    call.ID,
		Name:      call.Name,
		Arguments: argumentsJSON(call.Arguments),
	}))
	res := l.execute(ctx, ts, call, emit, checked)
	emit(wire.MustNew(wire.TypeToolResult, "", "", wire.ToolResult{
		CallID:     call.ID,
		Name:       call.Name,
		Status:     res.Status,
		ExitCode:   res.ExitCode,
		JobID:      res.JobID,
		Output:     res.Output,
		Truncated:  res.Truncated,
		TotalBytes: res.TotalBytes,
		TotalLines: res.TotalLines,
		OutputPath: res.OutputPath,
		Cwd:        res.Cwd,
		Error:      res.Err,
	}))
	return res
}

// execute runs the call's tool, or explains to the model why it did not.
func (l *Loop) execute(ctx context.Context, ts toolset, call ToolCall, emit func(wire.Envelope), checked bool) tools.Result {
	tool, ok := ts.byName[call.Name]
	switch {
	case !ok:
		return tools.Result{Err: fmt.Sprintf("unknown tool %q; the available tools are: %s", call.Name, ts.names())}
	case !json.Valid([]byte(orEmptyObject(call.Arguments))):
		return tools.Result{Err: "the arguments are not a valid JSON object; call the tool again with valid JSON"}
	case ctx.Err() != nil:
		return tools.Result{Err: msgInterruptedBefore}
	}
	if checked && l.check != nil {
		if ok, reason := l.check(ctx, call); !ok {
			return tools.Result{Err: msgNotAllowed + reason}
		}
	}
	out := &utf8Chunker{emit: func(s string) {
		emit(wire.MustNew(wire.TypeToolOutput, "", "", wire.ToolOutput{CallID: call.ID, Output: s}))
	}}
	res := l.safeRun(ctx, tool, tools.Call{ID: call.ID, Args: json.RawMessage(orEmptyObject(call.Arguments)), Output: out.write})
	out.flush()
	if ctx.Err() != nil && res.Err == "" {
		res.Err = msgInterrupted
	}
	return res
}

// safeRun runs tool and turns a panic into a failed result, so that one
// broken tool cannot take the agent down.
func (l *Loop) safeRun(ctx context.Context, tool tools.Tool, call tools.Call) (res tools.Result) {
	defer func() {
		if p := recover(); p != nil {
			l.log.Error("tool panicked", "tool", tool.Name(), "panic", p)
			res = tools.Result{Err: fmt.Sprintf("the tool crashed: %v", p)}
		}
	}()
	return tool.Run(ctx, call)
}

func (ts toolset) names() string {
	names := make([]string, 0, len(ts.defs))
	for _, d := range ts.defs {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// modelText is the tool message content the model reads for res: the
// error, the output, and for commands a last line with the exit code or
// status and, when the output was cut, its full size and where it is.
func modelText(res tools.Result) string {
	var b strings.Builder
	if res.Err != "" {
		b.WriteString("error: ")
		b.WriteString(res.Err)
	}
	if res.Output != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(res.Output)
	}
	var notes []string
	switch {
	case res.ExitCode != nil && (res.Status == "" || res.Status == wire.StatusExited):
		notes = append(notes, fmt.Sprintf("exit code %d", *res.ExitCode))
	case res.Status != "" && res.Status != wire.StatusBackground && res.Status != wire.StatusAwaitingInput:
		notes = append(notes, res.Status)
	}
	if res.Truncated && res.TotalBytes > 0 && res.OutputPath != "" {
		notes = append(notes, fmt.Sprintf("output truncated: %d bytes, %d lines in all; read_file %s pages through it",
			res.TotalBytes, res.TotalLines, res.OutputPath))
	}
	if len(notes) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString("[" + strings.Join(notes, "; ") + "]")
	}
	if b.Len() == 0 {
		return msgNoOutput
	}
	return b.String()
}

// argumentsJSON is the model's arguments as a JSON value for the tool_call
// event: the object itself, or, if the model produced invalid JSON, its
// text as a JSON string.
func argumentsJSON(args string) json.RawMessage {
	args = orEmptyObject(args)
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args) // a string always encodes
	return quoted
}

func orEmptyObject(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}

// utf8Chunker turns output chunks into valid UTF-8 strings, holding back an
// incomplete rune at a chunk's end until the next chunk completes it.
type utf8Chunker struct {
	pending []byte
	emit    func(string)
}

func (c *utf8Chunker) write(chunk []byte) {
	if len(chunk) == 0 {
		return
	}
	buf := append(c.pending, chunk...)
	cut := len(buf)
	// Hold back at most utf8.UTFMax-1 bytes of an unfinished rune.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	c.pending = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		c.emit(strings.ToValidUTF8(string(buf[:cut]), "\uFFFD"))
	}
}

func (c *utf8Chunker) flush() {
	if len(c.pending) > 0 {
		c.emit(strings.ToValidUTF8(string(c.pending), "\uFFFD"))
		c.pending = nil
	}
}
