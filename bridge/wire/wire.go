package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Version is the protocol version this package speaks. Peers exchange it in
// hello; a peer that receives a different major version answers with an
// error of code CodeVersionMismatch and closes the connection.
const Version = 1

// Path is the HTTP path on which agents and bridges accept WebSocket
// connections that speak this protocol.
const Path = "/v1/ws"

// MaxMessageBytes is the largest JSON text frame a peer accepts. A larger
// frame is discarded and answered with an error of code CodeTooLarge; the
// connection stays open.
const MaxMessageBytes = 1 << 20

// Type names a message. Unknown types are answered with CodeUnknownType.
type Type string

// Message types. "Request" types travel towards the agent; "event" types
// travel away from it and carry a per-thread Seq.
const (
	// TypeHello opens a connection in both directions (payload Hello).
	TypeHello Type = "hello"
	// TypeUserMessage is a request that starts a turn (payload UserMessage).
	TypeUserMessage Type = "user_message"
	// TypeInterrupt is a request that cancels the running turn (no payload).
	TypeInterrupt Type = "interrupt"
	// TypePing is a request answered at once by TypePong with the same ID; it
	// measures round trips and keeps idle connections honest.
	TypePing Type = "ping"
	// TypePong answers TypePing.
	TypePong Type = "pong"

	// TypeUserEcho is the event recording an accepted user message, so that
	// every watcher of a thread sees the whole conversation (payload UserMessage).
	TypeUserEcho Type = "user_echo"
	// TypeAssistantDelta is a streamed fragment of assistant text (payload Text).
	TypeAssistantDelta Type = "assistant_delta"
	// TypeAssistantMessage is the complete assistant text of one model step
	// (payload Text).
	TypeAssistantMessage Type = "assistant_message"
	// TypeToolCall announces a tool the model asked for (payload ToolCall).
	TypeToolCall Type = "tool_call"
	// TypeToolOutput is a streamed chunk of a running tool's output (payload ToolOutput).
	TypeToolOutput Type = "tool_output"
	// TypeToolResult ends a tool call (payload ToolResult).
	TypeToolResult Type = "tool_result"
	// TypeTurnDone ends a turn (payload TurnDone).
	TypeTurnDone Type = "turn_done"
	// TypeError reports a problem (payload Error). When it answers a request,
	// its ID is the request's ID.
	TypeError Type = "error"
)

// Envelope is one JSON text frame. Data holds the type's payload.
type Envelope struct {
	Type Type `json:"type"`
	// Thread names the conversation the message belongs to.
	Thread string `json:"thread,omitempty"`
	// Seq numbers events within a thread, from 1, without gaps. Requests
	// carry no Seq.
	Seq uint64 `json:"seq,omitempty"`
	// ID correlates: a request's sender picks it, and events caused by that
	// request (the turn's events, an error) carry it back.
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Hello is the first message in each direction.
type Hello struct {
	Version int `json:"version"`
	// Role is who is speaking: RoleClient, RoleBridge or RoleAgent.
	Role string `json:"role"`
	// Software names the sender's build, e.g. "boxwire-agent/0.1.0".
	Software string `json:"software,omitempty"`
	// Thread is, from a client, the thread to attach to (empty: a new one);
	// in the answer, the thread the connection is bound to.
	Thread string `json:"thread,omitempty"`
	// AfterSeq is, from a client, the last event Seq it has seen; the answer
	// is followed by every later event. In a bridge's answer it is the seq
	// the events that follow come after: the client's after_seq, or the
	// log's last seq when the client's was ahead of it (an error of code
	// CodeSeqAhead follows the answer then).
	AfterSeq uint64 `json:"after_seq,omitempty"`
	// Posture is, from an agent, what it found about its confinement
	// (see security.go); nil from other roles.
	Posture *Posture `json:"posture,omitempty"`
	// Instance is, from an agent, its process's random id (resume.go).
	Instance string `json:"instance,omitempty"`
	// AgentHash is, from an agent, the SHA-256 of the binary it runs
	// ("sha256:<hex>" of /proc/self/exe, read at its start): with Software
	// it says which build serves, also when the binary was mounted over
	// the image's (the bridge's --agent-binary).
	AgentHash string `json:"agent_hash,omitempty"`
	// HostTools, from a bridge to its agent only, says the bridge answers
	// host_tools_list (hosttools.go): the agent asks it at each turn's
	// start. An agent does not ask a bridge that does not say so.
	HostTools bool `json:"host_tools,omitempty"`
}

// Roles carried in Hello.Role.
const (
	RoleClient = "client"
	RoleBridge = "bridge"
	RoleAgent  = "agent"
)

// UserMessage is the payload of TypeUserMessage and TypeUserEcho.
type UserMessage struct {
	Text string `json:"text"`
}

// Text is the payload of TypeAssistantDelta and TypeAssistantMessage.
type Text struct {
	Text string `json:"text"`
}

// ToolCall is the payload of TypeToolCall.
type ToolCall struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Arguments is the JSON object the model produced.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolOutput is the payload of TypeToolOutput: raw output as it arrives.
type ToolOutput struct {
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// ToolResult is the payload of TypeToolResult.
type ToolResult struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Status says how a command ended when that is not simply "it exited":
	// one of the Status constants; empty for other tools.
	Status string `json:"status,omitempty"`
	// ExitCode is the process exit code for execute; nil for other tools
	// and for commands still running (awaiting input, background).
	ExitCode *int `json:"exit_code,omitempty"`
	// JobID names the background job a still-running command became.
	JobID string `json:"job_id,omitempty"`
	// Output is what the model sees, capped.
	Output string `json:"output"`
	// Truncated says Output was cut; TotalBytes and TotalLines are the sizes
	// before cutting, and OutputPath is a file in the sandbox holding the
	// whole output (read_file pages through it).
	Truncated  bool   `json:"truncated"`
	TotalBytes int64  `json:"total_bytes,omitempty"`
	TotalLines int64  `json:"total_lines,omitempty"`
	OutputPath string `json:"output_path,omitempty"`
	// Cwd is, for execute in the thread's remembered shell, the directory
	// the next command starts in (docs/tools.md); empty for other tools
	// and for fresh calls.
	Cwd string `json:"cwd,omitempty"`
	// Error is set when the tool failed; the model sees it as the result.
	Error string `json:"error,omitempty"`
}

// Statuses of a command in ToolResult.Status.
const (
	StatusExited        = "exited"
	StatusTimedOut      = "timed_out"
	StatusInterrupted   = "interrupted"
	StatusAwaitingInput = "awaiting_input"
	StatusBackground    = "background"
	// StatusKilled: job_kill stopped the job.
	StatusKilled = "killed"
	// StatusOOMKilled: the kernel's OOM killer ended the command (it died
	// of SIGKILL while the sandbox's memory cgroup counted an OOM kill);
	// ToolResult.Error says so and names the sandbox's memory limit.
	StatusOOMKilled = "oom_killed"
)

// TurnDone is the payload of TypeTurnDone.
type TurnDone struct {
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	Usage  *Usage `json:"usage,omitempty"`
}

// Reasons a turn ends.
const (
	ReasonStop        = "stop"
	ReasonInterrupted = "interrupted"
	ReasonError       = "error"
	ReasonStepLimit   = "step_limit"
)

// Usage counts model tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Error is the payload of TypeError.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Code classifies an Error.
type Code string

// Error codes.
const (
	CodeBadMessage      Code = "bad_message"
	CodeUnknownType     Code = "unknown_type"
	CodeTooLarge        Code = "too_large"
	CodeVersionMismatch Code = "version_mismatch"
	CodeBusy            Code = "busy"
	CodeNotFound        Code = "not_found"
	// CodeSeqAhead answers a hello whose after_seq is beyond the thread's
	// last event: the connection stays, and events follow from the log's
	// end (the hello answer's AfterSeq), not from the client's after_seq.
	CodeSeqAhead           Code = "seq_ahead"
	CodeUnauthorized       Code = "unauthorized"
	CodeSandboxUnavailable Code = "sandbox_unavailable"
	CodeEngineUnavailable  Code = "engine_unavailable"
	CodeLLM                Code = "llm_error"
	CodeInternal           Code = "internal"
	// CodeQuotaExceeded refuses what would take a user past one of their
	// limits (sandboxes at a time, model tokens a day); the message names
	// the limit.
	CodeQuotaExceeded Code = "quota_exceeded"
)

// Error makes Error usable as a Go error.
func (e Error) Error() string { return string(e.Code) + ": " + e.Message }

// New builds an envelope around payload, which may be nil.
func New(typ Type, thread, id string, payload any) (Envelope, error) {
	env := Envelope{Type: typ, Thread: thread, ID: id}
	if payload == nil {
		return env, nil
	}
	data, err := marshal(payload)
	if err != nil {
		return Envelope{}, fmt.Errorf("encode %s payload: %w", typ, err)
	}
	env.Data = data
	return env, nil
}

// Marshal encodes an envelope as one frame's text. Unlike json.Marshal it
// leaves <, > and & as they are, so commands stay readable on the wire.
func Marshal(env Envelope) ([]byte, error) {
	data, err := marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode %s message: %w", env.Type, err)
	}
	return data, nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MustNew is New for payloads that always encode (the payload types of this
// package); it panics otherwise, which is a programming error.
func MustNew(typ Type, thread, id string, payload any) Envelope {
	env, err := New(typ, thread, id, payload)
	if err != nil {
		panic(err)
	}
	return env
}

// ErrorEnvelope builds a TypeError envelope.
func ErrorEnvelope(thread, id string, code Code, format string, args ...any) Envelope {
	return MustNew(TypeError, thread, id, Error{Code: code, Message: fmt.Sprintf(format, args...)})
}

// Decode unmarshals the envelope's payload into v.
func (e Envelope) Decode(v any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("%s: missing data", e.Type)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%s: decode data: %w", e.Type, err)
	}
	return nil
}

// requests and events hold every defined type, by kind. Files that define
// more types register them with registerRequests and registerEvents in an
// init function, so that Known and IsEvent stay the single source of truth.
var (
	requests = map[Type]bool{}
	events   = map[Type]bool{}
)

func init() {
	registerRequests(TypeHello, TypeUserMessage, TypeInterrupt, TypePing, TypePong)
	registerEvents(TypeUserEcho, TypeAssistantDelta, TypeAssistantMessage, TypeToolCall,
		TypeToolOutput, TypeToolResult, TypeTurnDone, TypeError)
}

// registerRequests records types that are not events: requests, replies and
// connection control (hello, ping, pong).
func registerRequests(ts ...Type) {
	for _, t := range ts {
		requests[t] = true
	}
}

// registerEvents records types that are events: numbered and logged.
func registerEvents(ts ...Type) {
	for _, t := range ts {
		events[t] = true
	}
}

// Types lists every defined type, sorted.
func Types() []Type {
	all := make([]Type, 0, len(requests)+len(events))
	for t := range requests {
		all = append(all, t)
	}
	for t := range events {
		all = append(all, t)
	}
	slices.Sort(all)
	return all
}

// Known reports whether t is a type this version of the protocol defines.
func Known(t Type) bool { return requests[t] || events[t] }

// IsRequest reports whether t is a request a client sends towards the
// agent (and a bridge forwards): every non-event type except the
// connection's own hello and pong.
func IsRequest(t Type) bool { return requests[t] && t != TypeHello && t != TypePong }

// IsEvent reports whether t is an event: a message that belongs to a
// thread's log and carries a Seq. (An error is an event when it is about
// the thread and a reply when it answers one request; see docs/protocol.md.)
func IsEvent(t Type) bool { return events[t] }

// ErrTooLarge is returned by ReadMessage for a frame over the limit.
var ErrTooLarge = errors.New("message too large")

// ReadBufferSize is the read buffer the bridge gives each WebSocket it
// holds open (to clients and to agents). Small: a frame's header and a
// small message fit, and a longer read goes straight into the reader's
// own buffer, but an idle connection holds 1 KiB instead of gorilla's
// default 4 KiB.
const ReadBufferSize = 1 << 10

// ReadMessage reads one frame of at most limit bytes from r and decodes it.
// A larger frame is drained (so the connection stays usable) and reported
// as ErrTooLarge; a frame that is not a JSON envelope with a type is
// reported as an Error with CodeBadMessage.
func ReadMessage(r io.Reader, limit int) (Envelope, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return Envelope{}, fmt.Errorf("read message: %w", err)
	}
	if len(data) > limit {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return Envelope{}, fmt.Errorf("drain large message: %w", err)
		}
		return Envelope{}, ErrTooLarge
	}
	return Parse(data)
}

// Parse decodes one frame. Its errors are of type Error with CodeBadMessage.
func Parse(data []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Envelope{}, Error{Code: CodeBadMessage, Message: "not a JSON envelope: " + err.Error()}
	}
	if env.Type == "" {
		return Envelope{}, Error{Code: CodeBadMessage, Message: "missing type"}
	}
	return env, nil
}
