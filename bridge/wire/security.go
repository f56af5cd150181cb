package wire

// Security messages: the agent's posture in its hello, the bridge's record
// of model usage per thread, and its egress decisions. See docs/security.md.

const (
	// TypeUsage is an event the bridge publishes after every model call it
	// proxied for the thread (payload UsageReport).
	TypeUsage Type = "usage"
	// TypeEgress is an event the bridge publishes for every request the
	// thread's sandbox made through the egress proxy (payload EgressDecision).
	TypeEgress Type = "egress"
)

// CodeBudgetExceeded is the error code of an event published when the
// thread's model budget (requests per minute or total tokens) refused a call.
const CodeBudgetExceeded Code = "budget_exceeded"

func init() {
	registerEvents(TypeUsage, TypeEgress)
}

// Posture is what the agent found about its own confinement at start. It
// travels in the agent's Hello; the bridge refuses an agent whose posture is
// weaker than it is configured to require. Capability sets are the
// hexadecimal masks of /proc/self/status; limits are 0 when unlimited or
// unknown.
type Posture struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	// CapEff and CapBnd are the effective and bounding capability masks.
	CapEff string `json:"cap_eff"`
	CapBnd string `json:"cap_bnd"`
	// NoNewPrivs is the no_new_privs bit.
	NoNewPrivs bool `json:"no_new_privs"`
	// Seccomp is the seccomp mode: 0 off, 1 strict, 2 filter.
	Seccomp int `json:"seccomp"`
	// ReadOnlyRoot says / is mounted read-only.
	ReadOnlyRoot bool `json:"read_only_root"`
	// PidsMax and MemoryMaxBytes are the cgroup limits (0: none found).
	PidsMax        int64 `json:"pids_max"`
	MemoryMaxBytes int64 `json:"memory_max_bytes"`
	// CPUQuota is the cgroup CPU quota in CPUs (0: none found).
	CPUQuota float64 `json:"cpu_quota,omitempty"`
	// Errors lists what could not be read; a check that needs it fails.
	Errors []string `json:"errors,omitempty"`
}

// UsageReport is the payload of TypeUsage: one proxied model call and the
// thread's running totals. The bridge counts what the model endpoint
// reported, so it is independent of what the agent claims.
type UsageReport struct {
	Model string `json:"model"`
	// Call is this call's usage; zero when the endpoint reported none.
	Call Usage `json:"call"`
	// Total is the thread's usage so far and Requests its model calls.
	Total    Usage `json:"total"`
	Requests int   `json:"requests"`
	// TokenBudget is the thread's total-token budget (0: none).
	TokenBudget int `json:"token_budget,omitempty"`
}

// EgressDecision is the payload of TypeEgress.
type EgressDecision struct {
	// Method is CONNECT for tunnels, else the HTTP method.
	Method string `json:"method"`
	// Host is the normalized host name and Port the port; when the request
	// could not be normalized, Host is the raw target.
	Host    string `json:"host"`
	Port    int    `json:"port,omitempty"`
	Allowed bool   `json:"allowed"`
	// Rule is the allowlist rule that matched; Reason says why a request
	// was refused.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}
