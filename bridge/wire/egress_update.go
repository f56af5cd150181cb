package wire

// Changing a thread's egress rules after it was created
// (docs/egress-thread.md, "Changing the rules"): the body of
// PATCH /v1/threads/{id} and the event that records the change.

const (
	// TypeEgressRules is an event the bridge publishes to every thread of
	// a sandbox whose egress rules were replaced (payload EgressRules).
	// The rules hold from the sandbox's next egress request on.
	TypeEgressRules Type = "egress_rules"
)

// EgressByAPI is EgressRules.By for a change made through the threads API
// (PATCH /v1/threads/{id}) by a holder of the bridge's token.
const EgressByAPI = "api"

func init() {
	registerEvents(TypeEgressRules)
}

// UpdateThread is the body of PATCH /v1/threads/{id}. Egress is required:
// it replaces the sandbox's own egress rules (the syntax of
// CreateThread.Egress; an empty list removes them).
type UpdateThread struct {
	Egress []string `json:"egress"`
}

// EgressRules is the payload of TypeEgressRules.
type EgressRules struct {
	// Rules are the sandbox's own egress rules now, canonical (as in
	// ThreadInfo.Egress); empty when it has none left.
	Rules []string `json:"rules"`
	// Previous are the rules they replaced.
	Previous []string `json:"previous,omitempty"`
	// By says who changed them: EgressByAPI for the threads API.
	By string `json:"by"`
}
