package wire

import (
	"encoding/json"
	"time"
)

// Sandbox lifecycle: the event that tells a thread's clients its sandbox
// went away, and the JSON bodies of the bridge's threads API
// (POST/GET/DELETE /v1/threads). See docs/lifecycle.md.

// TypeSandboxExited is the event a bridge publishes on a thread when its
// sandbox stops: the container died (exit code, out of memory), its time
// to live ran out, or the bridge removed it (payload SandboxExited).
const TypeSandboxExited Type = "sandbox_exited"

// Codes of the threads API and of hello, beside those in wire.go.
const (
	// CodeSandboxLimit means the bridge already runs its maximum number of
	// sandboxes; nothing was created.
	CodeSandboxLimit Code = "sandbox_limit"
	// CodeNotAllowed means the request named an image, runtime or scope
	// the bridge does not allow.
	CodeNotAllowed Code = "not_allowed"
)

// ExitReason says why a sandbox stopped.
type ExitReason string

// Exit reasons.
const (
	// ExitDied: the container exited on its own or was killed.
	ExitDied ExitReason = "exited"
	// ExitOOM: the container, or its main process, was killed for running
	// out of memory (or exited 137, the usual sign of it).
	ExitOOM ExitReason = "oom"
	// ExitIdle: nobody used the sandbox for its idle time to live.
	ExitIdle ExitReason = "idle_timeout"
	// ExitLifetime: the sandbox reached its maximum lifetime.
	ExitLifetime ExitReason = "max_lifetime"
	// ExitImageUpdate: the thread's image reference now names a newer
	// image; the sandbox is replaced by one running it.
	ExitImageUpdate ExitReason = "image_update"
)

// SandboxExited is the payload of TypeSandboxExited.
type SandboxExited struct {
	Reason ExitReason `json:"reason"`
	// ExitCode is the container's exit code when it died; nil when the
	// bridge removed it (TTL).
	ExitCode *int `json:"exit_code,omitempty"`
	// OOMKilled is true when the engine reported an out-of-memory kill.
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Message   string `json:"message"`
}

// Scope says which threads share a sandbox.
type Scope string

// Scopes.
const (
	// ScopeThread: one sandbox per thread (the default).
	ScopeThread Scope = "thread"
	// ScopeAssistant: one sandbox shared by every thread of an assistant id.
	ScopeAssistant Scope = "assistant"
)

// CreateThread is the body of POST /v1/threads. Every field is optional.
type CreateThread struct {
	// Image must be one of the bridge's allowed images; empty means the
	// bridge's default image.
	Image string `json:"image,omitempty"`
	// Runtime must be one of the bridge's allowed runtimes ("runsc");
	// empty means the bridge's default runtime.
	Runtime string `json:"runtime,omitempty"`
	// Scope is ScopeThread (default) or ScopeAssistant.
	Scope Scope `json:"scope,omitempty"`
	// Assistant names the assistant whose sandbox the thread shares;
	// required with ScopeAssistant.
	Assistant string `json:"assistant,omitempty"`
	// TTL is the sandbox's idle time to live as a Go duration ("10m");
	// empty means the bridge's default. It can only shorten the bridge's.
	TTL string `json:"ttl,omitempty"`
	// Policy is this thread's approval policy (docs/approvals.md: rules
	// only), checked before the bridge's own rules.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Egress are egress rules for this thread's sandbox, in the syntax of
	// the bridge's allowlist, added to the bridge's own; each must fall
	// within the bridge's thread cap (docs/egress-thread.md).
	Egress []string `json:"egress,omitempty"`
	// MCP declares MCP servers the agent runs inside this thread's
	// sandbox, beside the image's: an MCPServers object, the schema of the
	// image's /etc/boxwire/mcp.json (docs/tools.md, "MCP servers a thread
	// declares"). The bridge checks it, keeps it with the thread and hands
	// it to the agent at each turn's start.
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// Sandbox states in ThreadInfo.Status.
const (
	SandboxRunning      = "running"
	SandboxExitedStatus = "exited"
	// SandboxSuspended: the thread has no sandbox (idle TTL, or none was
	// running at the bridge's start); its log and workspace are kept, and
	// the next client attach starts a new sandbox with its history.
	SandboxSuspended = "suspended"
)

// ThreadInfo describes a thread and its sandbox in the threads API.
type ThreadInfo struct {
	ID        string `json:"id"`
	Scope     Scope  `json:"scope"`
	Assistant string `json:"assistant,omitempty"`
	Image     string `json:"image"`
	Runtime   string `json:"runtime,omitempty"`
	// Status is SandboxRunning, SandboxExitedStatus or SandboxSuspended.
	Status    string    `json:"status"`
	SandboxID string    `json:"sandbox_id"`
	Created   time.Time `json:"created"`
	// Expires is when the sandbox is replaced at the latest (its maximum
	// lifetime); IdleExpires is when it is suspended if nobody uses it.
	// For a suspended thread, Expires is when the thread itself is removed
	// (the bridge's thread retention) and IdleExpires is zero.
	Expires     time.Time `json:"expires"`
	IdleExpires time.Time `json:"idle_expires"`
	Clients     int       `json:"clients"`
	// Egress are the sandbox's egress rules beside the bridge's
	// (CreateThread.Egress, canonical form); empty when it has none.
	Egress []string `json:"egress,omitempty"`
	// ImageID is the image id the sandbox runs, when the bridge knows it.
	ImageID string `json:"image_id,omitempty"`
	// AgentVersion is the version the sandbox's agent named in its hello
	// (the part of Hello.Software after "boxwire-agent/", or all of it);
	// AgentHash is the SHA-256 of its binary (Hello.AgentHash). Empty
	// while no agent answered, and for a suspended thread.
	AgentVersion string `json:"agent_version,omitempty"`
	AgentHash    string `json:"agent_hash,omitempty"`
	// Suspended is when the thread's sandbox was suspended (status
	// SandboxSuspended only).
	Suspended *time.Time `json:"suspended,omitempty"`
	// Owner is the user the thread belongs to (docs/users.md).
	Owner string `json:"owner,omitempty"`
	// Posture is what the sandbox's agent found about its confinement in
	// its hello (Hello.Posture). Nil while no agent answered, and for a
	// suspended thread.
	Posture *Posture `json:"posture,omitempty"`
	// Relay is the bridge that relays the thread, in a list by a bridge
	// on a shared store that does not (docs/store.md, "Forwarding"): its
	// sandbox, clients and agent are described there, and GET
	// /v1/threads/{id} through any bridge is answered by it. Empty when
	// the answering bridge relays the thread, and for a suspended one.
	Relay string `json:"relay,omitempty"`
}

// ImageList is the body of GET /v1/images: the images a thread may ask
// for in CreateThread.Image, Default (used when it names none) first.
type ImageList struct {
	Default string   `json:"default"`
	Images  []string `json:"images"`
}

// ThreadList is the body of GET /v1/threads.
type ThreadList struct {
	Threads []ThreadInfo `json:"threads"`
}

func init() {
	registerEvents(TypeSandboxExited)
}
