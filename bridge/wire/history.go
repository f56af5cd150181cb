package wire

// Nothing lost: the history a bridge hands to a new agent, and the event
// that tells clients their sandbox was replaced. See docs/store.md.

const (
	// TypeHistory is sent by a bridge to an agent right after hello, before
	// any other request, when the thread already has a conversation
	// (payload History). It is split into frames under MaxMessageBytes;
	// the agent applies the events once the frame with More false arrives,
	// and only if its conversation for the thread is still empty. There is
	// no reply.
	TypeHistory Type = "history"
	// TypeSandboxReplaced is the event a bridge publishes when a thread's
	// sandbox was replaced by a new one with the same workspace volume and
	// the conversation restored (payload SandboxReplaced).
	TypeSandboxReplaced Type = "sandbox_replaced"
)

func init() {
	registerRequests(TypeHistory)
	registerEvents(TypeSandboxReplaced)
}

// History is the payload of TypeHistory: a chunk of the thread's logged
// conversation events (user_echo, assistant_message, tool_call,
// tool_result, turn_done), oldest first, with their seqs.
type History struct {
	Events []Envelope `json:"events"`
	// More says further history frames follow.
	More bool `json:"more,omitempty"`
}

// SandboxReplaced is the payload of TypeSandboxReplaced.
type SandboxReplaced struct {
	// Reason says why the old sandbox went: an ExitReason.
	Reason ExitReason `json:"reason"`
	// SandboxID is the new sandbox's id.
	SandboxID string `json:"sandbox_id"`
	// Restored counts the conversation events handed to the new agent.
	Restored int    `json:"restored"`
	Message  string `json:"message"`
}
