package sandbox

import (
	"context"
	"errors"
	"time"
)

// Manager creates and removes sandboxes. Implementations are safe for
// concurrent use. Nothing above this interface knows which engine runs the
// sandbox.
type Manager interface {
	// Ping checks that the engine answers; it returns an error wrapping
	// ErrEngineUnavailable when it does not.
	Ping(ctx context.Context) error
	// Create creates and starts a sandbox and returns once the engine reports
	// it running (not when its agent is ready). On failure nothing is left
	// behind.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Inspect returns the sandbox's current state, or an error wrapping
	// ErrNotFound.
	Inspect(ctx context.Context, id string) (Sandbox, error)
	// Stop asks the sandbox to stop, killing it after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove stops (if needed) and deletes the sandbox, but not its
	// workspace volume. Removing a sandbox that does not exist is not an
	// error.
	Remove(ctx context.Context, id string) error
	// Logs returns the last tail lines the sandbox's main process wrote,
	// also after it stopped (until it is removed); an error wraps
	// ErrNotFound when the sandbox is gone.
	Logs(ctx context.Context, id string, tail int) (string, error)
	// RemoveVolume deletes a workspace volume; a missing one is not an error.
	RemoveVolume(ctx context.Context, name string) error
	// List returns the sandboxes whose labels include all of labels.
	List(ctx context.Context, labels map[string]string) ([]Sandbox, error)
	// ListVolumes returns the names of the workspace volumes whose labels
	// include all of labels.
	ListVolumes(ctx context.Context, labels map[string]string) ([]string, error)
	// Close releases the engine connection.
	Close() error
}

// Spec says what to run.
type Spec struct {
	// Name is the container name (optional).
	Name string
	// Image is the image reference to run.
	Image string
	// Env is KEY=VALUE pairs for the agent.
	Env []string
	// Labels are attached to the sandbox (and its volume).
	Labels map[string]string
	// SocketDir is a host folder bind-mounted read-only at SocketMount,
	// holding the bridge's unix sockets and files for the sandbox (the LLM
	// and egress proxies, the egress CA); empty means none. Mount the
	// folder, not a socket file: a file bind goes stale when the bridge
	// restarts. The sandbox must not be able to write it (bridge/boxdir).
	SocketDir string
	// AgentDir is a host folder bind-mounted read-write at AgentMount,
	// where the agent makes its own socket; empty means none. The sandbox
	// writes it, so it must be capped (bridge/boxdir mounts a small tmpfs
	// there) and the host must trust no name in it.
	AgentDir string
	// WorkspaceVolume, when set, is a named volume mounted at WorkspaceMount,
	// created if missing (with Labels).
	WorkspaceVolume string
	// User is the user to run as ("1000:1000"); empty means the image's.
	User string
	// Cmd, when set, overrides the image's command (not its entrypoint).
	// Empty means the image's command.
	Cmd []string
	// Runtime, when set, is the OCI runtime for this sandbox ("runsc");
	// empty means the manager's default.
	Runtime string
	// AgentBinary, when set, is a host file bind-mounted read-only at
	// AgentBinaryPath, over the image's agent binary (the bridge's
	// --agent-binary: a developer's build without an image rebuild).
	AgentBinary string
	// Limits: zero means the manager's default.
	PidsLimit   int64
	MemoryBytes int64
	NanoCPUs    int64
}

// AgentBinaryPath is the agent binary in the image, where Spec.AgentBinary
// is mounted.
const AgentBinaryPath = "/usr/local/bin/boxwire-agent"

// SocketMount is where SocketDir appears inside the sandbox.
const SocketMount = "/run/boxwire"

// AgentMount is where AgentDir appears inside the sandbox.
const AgentMount = "/run/boxwire-agent"

// WorkspaceMount is where WorkspaceVolume appears inside the sandbox.
const WorkspaceMount = "/workspace"

// Sandbox describes a created sandbox.
type Sandbox struct {
	ID      string
	Name    string
	Image   string
	Labels  map[string]string
	Running bool
	// ExitCode and OOMKilled are set once the sandbox has stopped.
	ExitCode  int
	OOMKilled bool
	Created   time.Time
	// Runtime is the OCI runtime it runs under (Inspect only; empty when
	// unknown or the engine's default).
	Runtime string
}

// Errors that callers test for with errors.Is.
var (
	// ErrEngineUnavailable means the container engine did not answer.
	ErrEngineUnavailable = errors.New("container engine unavailable")
	// ErrNotFound means no such sandbox.
	ErrNotFound = errors.New("sandbox not found")
	// ErrImageNotFound means the image is not present in the engine.
	ErrImageNotFound = errors.New("image not found")
)
