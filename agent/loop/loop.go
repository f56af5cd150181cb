package loop

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultMaxSteps is the number of model calls a turn may make when
// Config.MaxSteps is zero.
const DefaultMaxSteps = 50

// DefaultWorkspace is the workspace path named in the default system prompt
// when Config.Workspace is empty.
const DefaultWorkspace = "/workspace"

// Config configures a Loop. The zero value of every field but Model means
// its default.
type Config struct {
	// Model answers each step. Required.
	Model Model
	// Tools are the tools the model may call; names must be unique.
	Tools []tools.Tool
	// SystemPrompt is sent first in every request. Empty means
	// DefaultSystemPrompt(Workspace, Tools).
	SystemPrompt string
	// Workspace is the sandbox's workspace path, used by the default prompt.
	Workspace string
	// MaxSteps caps the model calls in one turn (DefaultMaxSteps if zero).
	MaxSteps int
	// Budget is the conversation size, in approximate tokens (four
	// characters each), past which the oldest tool outputs are shortened
	// in what the model is sent; zero means DefaultBudget. The
	// conversation itself keeps them whole.
	Budget int
	// RetryFor bounds how long a model call that failed on the way to the
	// endpoint, before any of its answer arrived, is made again (retry.go);
	// zero means DefaultRetryFor, a negative value never retries.
	RetryFor time.Duration
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Check, when set, is asked before each tool call runs (after its
	// arguments are found valid); a refusal becomes the call's result,
	// "not run: <reason>", and the model carries on. It may block (the
	// bridge may wait for a person) and must return when ctx ends. Nil
	// allows everything (standalone agents). See docs/approvals.md.
	Check func(ctx context.Context, call ToolCall) (allowed bool, reason string)
	// TurnTools, when set, is asked at the start of each turn (and of each
	// Direct call of a tool Tools does not have) for tools offered besides
	// Tools: the host tools the bridge allows the thread, the tools of the
	// image's and the thread's MCP servers. It may block briefly (the
	// agent asks its bridge) and must return when ctx ends. A name Tools
	// already has is skipped, so a Direct call of one of Tools does not
	// ask.
	TurnTools func(ctx context.Context) []tools.Tool
}

// Loop runs turns. It holds no per-conversation state and is safe for
// concurrent use on different Conversations.
type Loop struct {
	model    Model
	tools    map[string]tools.Tool
	defs     []ToolDef
	system   string
	maxSteps int
	budget   int
	retryFor time.Duration
	log      *slog.Logger
	check    func(context.Context, ToolCall) (bool, string)
	more     func(context.Context) []tools.Tool
}

// New returns a Loop for cfg.
func New(cfg Config) *Loop {
	l := &Loop{
		model:    cfg.Model,
		tools:    make(map[string]tools.Tool, len(cfg.Tools)),
		system:   cfg.SystemPrompt,
		maxSteps: cfg.MaxSteps,
		budget:   cfg.Budget,
		retryFor: cfg.RetryFor,
		log:      cfg.Logger,
		check:    cfg.Check,
		more:     cfg.TurnTools,
	}
	if l.retryFor == 0 {
		l.retryFor = DefaultRetryFor
	}
	if l.budget <= 0 {
		l.budget = DefaultBudget
	}
	if l.maxSteps <= 0 {
		l.maxSteps = DefaultMaxSteps
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.system == "" {
		l.system = DefaultSystemPrompt(cfg.Workspace, cfg.Tools)
	}
	for _, t := range cfg.Tools {
		l.tools[t.Name()] = t
		l.defs = append(l.defs, ToolDef{Name: t.Name(), Description: t.Description(), Parameters: t.Parameters()})
	}
	return l
}

// DefaultSystemPrompt describes the sandbox and the tools to the model.
func DefaultSystemPrompt(workspace string, ts []tools.Tool) string {
	if workspace == "" {
		workspace = DefaultWorkspace
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Name())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are boxwire, a coding agent working inside an isolated Linux container (Debian) on behalf of the user.\n")
	fmt.Fprintf(&b, "Your workspace is %s; it persists between sessions. Relative paths are relative to it, and file tools cannot reach outside it.\n", workspace)
	if len(names) > 0 {
		fmt.Fprintf(&b, "You can call these tools: %s.\n", strings.Join(names, ", "))
	}
	b.WriteString("Use the tools to inspect files and run commands instead of guessing; read a file before you edit it. ")
	b.WriteString("Commands run non-interactively (stdin is empty) with a timeout; start long-running servers in the background. ")
	b.WriteString("The network may be unavailable. Tool output can be truncated; the result says so and how large it was. ")
	b.WriteString("When the task is done, answer briefly with what you did and what you found.")
	return b.String()
}

// Turn runs one turn: it appends text as a user message to conv, then calls
// the model and the tools it asks for until the model answers without tool
// calls, the step limit is reached, the model fails, or ctx ends.
//
// Turn blocks until the turn is over. It reports progress through emit
// (called from Turn's goroutine or a tool's output goroutine, one call at a
// time; envelopes carry no thread, id or seq) and always ends with exactly
// one turn_done event, which it also returns. Turn does not touch conv
// after emitting turn_done. When ctx ends, the running tool is stopped and
// every tool call in the history is answered, so the next turn can run.
func (l *Loop) Turn(ctx context.Context, conv *Conversation, text string, emit func(wire.Envelope)) wire.TurnDone {
	conv.Append(Message{Role: RoleUser, Content: text})
	var usage wire.Usage
	reason := l.steps(ctx, conv, l.toolsFor(ctx), emit, &usage)
	done := wire.TurnDone{Reason: reason}
	if usage != (wire.Usage{}) {
		done.Usage = &usage
	}
	emit(wire.MustNew(wire.TypeTurnDone, "", "", done))
	return done
}

// steps runs model steps and returns the turn's end reason.
func (l *Loop) steps(ctx context.Context, conv *Conversation, ts toolset, emit func(wire.Envelope), usage *wire.Usage) string {
	for step := 0; step < l.maxSteps; step++ {
		if ctx.Err() != nil {
			return wire.ReasonInterrupted
		}
		resp, err := l.callModel(ctx, conv, ts, emit)
		addUsage(usage, resp.Usage)
		if err != nil {
			if ctx.Err() != nil {
				return wire.ReasonInterrupted
			}
			l.log.Warn("model call failed", "step", step, "err", err)
			emit(wire.ErrorEnvelope("", "", wire.CodeLLM, "%s", err.Error()))
			return wire.ReasonError
		}
		if len(resp.ToolCalls) == 0 {
			return wire.ReasonStop
		}
		for _, call := range resp.ToolCalls {
			l.runCall(ctx, conv, ts, call, emit)
		}
	}
	return wire.ReasonStepLimit
}

// callModel streams one model step, emits its text, and appends the
// assistant message (with whatever text arrived, even on failure).
func (l *Loop) callModel(ctx context.Context, conv *Conversation, ts toolset, emit func(wire.Envelope)) (Response, error) {
	req := Request{
		Messages: append([]Message{{Role: RoleSystem, Content: l.system}},
			fitBudget(conv.Messages(), l.budget-tokens(l.system))...),
		Tools: ts.defs,
	}
	var streamed strings.Builder
	resp, err := l.stream(ctx, req, func(delta string) { // retry.go
		if delta == "" {
			return
		}
		streamed.WriteString(delta)
		emit(wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: delta}))
	})
	if err != nil {
		// Keep what the user already saw, but no half-made tool calls.
		resp.ToolCalls = nil
		if resp.Text == "" {
			resp.Text = streamed.String()
		}
	}
	if resp.Text != "" {
		emit(wire.MustNew(wire.TypeAssistantMessage, "", "", wire.Text{Text: resp.Text}))
	}
	if resp.Text != "" || len(resp.ToolCalls) > 0 {
		resp.ToolCalls = slices.Clone(resp.ToolCalls) // the model may share its slice
		for i := range resp.ToolCalls {
			if resp.ToolCalls[i].ID == "" {
				resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", conv.Len(), i)
			}
		}
		conv.Append(Message{Role: RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
	}
	return resp, err
}

func addUsage(sum *wire.Usage, u wire.Usage) {
	sum.PromptTokens += u.PromptTokens
	sum.CompletionTokens += u.CompletionTokens
	sum.TotalTokens += u.TotalTokens
}

// toolset is what one turn may call: the loop's tools and the turn's own
// (Config.TurnTools).
type toolset struct {
	byName map[string]tools.Tool
	defs   []ToolDef
}

// toolsFor returns the tools of a turn (or Direct call) under ctx.
func (l *Loop) toolsFor(ctx context.Context) toolset {
	ts := toolset{byName: l.tools, defs: l.defs}
	if l.more == nil {
		return ts
	}
	extra := l.more(ctx)
	if len(extra) == 0 {
		return ts
	}
	ts.byName = maps.Clone(l.tools)
	ts.defs = slices.Clone(l.defs)
	for _, t := range extra {
		if _, taken := ts.byName[t.Name()]; taken {
			l.log.Warn("tool name already taken; the turn's tool is skipped", "tool", t.Name())
			continue
		}
		ts.byName[t.Name()] = t
		ts.defs = append(ts.defs, ToolDef{Name: t.Name(), Description: t.Description(), Parameters: t.Parameters()})
	}
	return ts
}
