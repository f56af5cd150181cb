package loop

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Roles of conversation messages, as the OpenAI chat API names them.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Model is a chat model that can call tools.
type Model interface {
	// Stream sends req and blocks until the model's answer is complete or
	// ctx ends. Text fragments are passed to onDelta (from the calling
	// goroutine, in order) as they arrive. On error, the returned Response
	// holds whatever arrived before the failure.
	Stream(ctx context.Context, req Request, onDelta func(text string)) (Response, error)
}

// Request is one model call: the whole conversation, system prompt first,
// and the tools the model may call.
type Request struct {
	Messages []Message
	Tools    []ToolDef
}

// Response is a model's complete answer to one Request.
type Response struct {
	// Text is the assistant text of this step (all deltas joined).
	Text string
	// ToolCalls are the tools the model asked for, in order.
	ToolCalls []ToolCall
	// FinishReason is the model's reason for stopping, e.g. "stop" or
	// "tool_calls"; informational only.
	FinishReason string
	// Usage counts the tokens of this call; zero if the endpoint did not say.
	Usage wire.Usage
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// ToolCall is one tool invocation the model asked for.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the arguments text exactly as the model produced it
	// (normally a JSON object; the loop reports invalid JSON to the model).
	Arguments string
}

// Message is one entry of a conversation.
type Message struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant, RoleTool.
	Role    string
	Content string
	// ToolCalls is set on assistant messages that called tools.
	ToolCalls []ToolCall
	// ToolCallID is set on tool messages: the call this message answers.
	ToolCallID string
}

// Conversation is the history of one thread, without the system prompt.
// It is safe for concurrent use, but only one turn may run on it at a time
// (the session enforces that).
type Conversation struct {
	mu   sync.Mutex
	msgs []Message
}

// Messages returns a copy of the history.
func (c *Conversation) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Message, len(c.msgs))
	copy(out, c.msgs)
	return out
}

// Len returns the number of messages in the history.
func (c *Conversation) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// Append adds messages to the end of the history.
func (c *Conversation) Append(msgs ...Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msgs...)
}
