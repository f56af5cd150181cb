package wire

import "log/slog"

// Warm pool (docs/pool.md): the bridge keeps sandboxes started and greeted
// before any thread asks for one. A pooled sandbox starts without its LLM
// proxy token; when a thread takes it, the bridge greets the agent with the
// thread's id and sends TypeClaim with the token, before any other request.
const (
	// TypeClaim gives a pooled sandbox's agent what binds it to its thread
	// (payload Claim). Only the bridge sends it; the bridge refuses it from
	// clients. The agent answers TypeClaimed with the same id.
	TypeClaim Type = "claim"
	// TypeClaimed answers TypeClaim once the agent applied it (no payload).
	TypeClaimed Type = "claimed"
)

func init() { registerRequests(TypeClaim, TypeClaimed) }

// Claim is the payload of TypeClaim. It holds a secret: printing or
// logging it shows the token redacted.
type Claim struct {
	// LLMToken is the token the sandbox's LLM proxy accepts (the agent
	// sends it as its bearer token); it is the BOXWIRE_LLM_TOKEN that a
	// sandbox created for its thread gets in its environment.
	LLMToken string `json:"llm_token"`
}

// String describes c with the token redacted.
func (c Claim) String() string { return "Claim{LLMToken:[redacted]}" }

// LogValue logs c with the token redacted.
func (c Claim) LogValue() slog.Value { return slog.StringValue(c.String()) }
