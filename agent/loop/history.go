package loop

import (
	"encoding/json"
	"strings"

	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// msgLost answers, in a rebuilt history, a tool call whose result never
// reached the log (the sandbox stopped while it ran).
const msgLost = "error: no result: the sandbox stopped while this call ran"

// FromEvents rebuilds a conversation from a thread's logged events, oldest
// first: user_echo becomes a user message; assistant_message and the
// tool_calls after it become one assistant message; tool_result becomes
// the tool message the model read. Events outside a turn (run_tool
// requests) and of other types are skipped. A call left without a result
// is answered with an error, so the history is always valid for the model.
// The log does not say where a step ends, so a tool_call that follows a
// tool_result starts a new assistant message: calls a step made together
// come back as consecutive steps, which the model reads the same way.
func FromEvents(events []wire.Envelope) []Message {
	var h historyBuilder
	for _, env := range events {
		h.add(env)
	}
	h.closeStep()
	return h.msgs
}

// historyBuilder is FromEvents' state: the messages so far, the turn's id
// and the open step (its assistant message's index and the unanswered
// calls).
type historyBuilder struct {
	msgs    []Message
	turnID  string
	inTurn  bool
	step    int // index of the open assistant message, -1 when none
	pending []string
	stepHas bool
}

func (h *historyBuilder) add(env wire.Envelope) {
	switch env.Type {
	case wire.TypeUserEcho:
		var m wire.UserMessage
		if env.Decode(&m) == nil {
			h.closeStep()
			h.msgs = append(h.msgs, Message{Role: RoleUser, Content: m.Text})
			h.turnID, h.inTurn = env.ID, true
		}
	case wire.TypeTurnDone:
		if h.inTurn && env.ID == h.turnID {
			h.closeStep()
			h.inTurn = false
		}
	case wire.TypeAssistantMessage:
		var m wire.Text
		if h.ours(env) && env.Decode(&m) == nil {
			h.closeStep()
			h.openStep(m.Text)
		}
	case wire.TypeToolCall:
		var c wire.ToolCall
		if !h.ours(env) || env.Decode(&c) != nil || strings.HasPrefix(c.CallID, "run_") {
			return
		}
		if !h.stepHas || h.answered() {
			h.closeStep()
			h.openStep("")
		}
		a := &h.msgs[h.step]
		a.ToolCalls = append(a.ToolCalls, ToolCall{ID: c.CallID, Name: c.Name, Arguments: callArgs(c.Arguments)})
		h.pending = append(h.pending, c.CallID)
	case wire.TypeToolResult:
		var r wire.ToolResult
		if !h.ours(env) || env.Decode(&r) != nil || !h.take(r.CallID) {
			return
		}
		h.msgs = append(h.msgs, Message{Role: RoleTool, ToolCallID: r.CallID, Content: modelText(resultOf(r))})
	}
}

// ours reports whether env belongs to the open turn.
func (h *historyBuilder) ours(env wire.Envelope) bool { return h.inTurn && env.ID == h.turnID }

func (h *historyBuilder) openStep(text string) {
	h.msgs = append(h.msgs, Message{Role: RoleAssistant, Content: text})
	h.step, h.stepHas = len(h.msgs)-1, true
}

// answered reports whether the open step has tool messages already (a
// new tool_call then starts the next step).
func (h *historyBuilder) answered() bool {
	return h.stepHas && len(h.msgs)-1 > h.step
}

// take removes id from the pending calls.
func (h *historyBuilder) take(id string) bool {
	for i, p := range h.pending {
		if p == id {
			h.pending = append(h.pending[:i], h.pending[i+1:]...)
			return true
		}
	}
	return false
}

// closeStep answers the open step's calls that have no result and closes
// it; an assistant message with neither text nor calls is dropped.
func (h *historyBuilder) closeStep() {
	for _, id := range h.pending {
		h.msgs = append(h.msgs, Message{Role: RoleTool, ToolCallID: id, Content: msgLost})
	}
	h.pending = nil
	if h.stepHas {
		if a := h.msgs[h.step]; a.Content == "" && len(a.ToolCalls) == 0 {
			h.msgs = append(h.msgs[:h.step], h.msgs[h.step+1:]...)
		}
	}
	h.stepHas = false
}

func resultOf(r wire.ToolResult) tools.Result {
	return tools.Result{
		Output: r.Output, Err: r.Error, ExitCode: r.ExitCode, Status: r.Status, JobID: r.JobID,
		Truncated: r.Truncated, TotalBytes: r.TotalBytes, TotalLines: r.TotalLines, OutputPath: r.OutputPath,
	}
}

// callArgs turns a tool_call's arguments back into the model's text: a
// JSON string (invalid JSON the model produced) is unquoted.
func callArgs(raw []byte) string {
	s := string(raw)
	if strings.HasPrefix(s, `"`) {
		var txt string
		if err := json.Unmarshal(raw, &txt); err == nil {
			return txt
		}
	}
	return s
}

// ReplaceIfEmpty sets the history to msgs if it is empty and reports
// whether it did. A session uses it to restore a thread's history without
// overwriting a conversation the agent still has.
func (c *Conversation) ReplaceIfEmpty(msgs []Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.msgs) > 0 {
		return false
	}
	c.msgs = append([]Message(nil), msgs...)
	return true
}
