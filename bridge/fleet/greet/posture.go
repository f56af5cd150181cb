package greet

import (
	"fmt"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// PosturePolicy is what a sandbox's agent must report in its hello (see
// wire.Posture) for the bridge to use it; a weaker one is refused with
// sandbox_unavailable and the sandbox removed.
type PosturePolicy struct {
	// NonRoot requires uid and gid other than 0.
	NonRoot bool
	// NoCapabilities requires empty effective and bounding sets.
	NoCapabilities bool
	// NoNewPrivs requires the no_new_privs bit.
	NoNewPrivs bool
	// Seccomp requires a seccomp filter (mode 2) under runtimes that apply
	// the engine's seccomp option; ForRuntime drops it for gVisor's runsc,
	// which ignores that option and filters system calls in its own kernel.
	Seccomp bool
	// ReadOnlyRoot requires a read-only root filesystem.
	ReadOnlyRoot bool
	// Limits requires pids and memory limits.
	Limits bool
}

// StrictPosture requires everything the bridge configures.
func StrictPosture() *PosturePolicy {
	return &PosturePolicy{NonRoot: true, NoCapabilities: true, NoNewPrivs: true, Seccomp: true, ReadOnlyRoot: true, Limits: true}
}

// ForRuntime returns the policy for a sandbox run by the OCI runtime rt
// ("" is the engine's default): pol itself, or for "runsc" a copy that
// requires only what gVisor's kernel can show from inside. gVisor ignores
// the engine's seccomp option (it filters in its own kernel), reports
// NoNewPrivs as 0, and keeps the container's cgroup limits on the host,
// outside its view; those are applied by the engine all the same. Each
// sandbox is checked under its own runtime, so a thread that asks for runsc
// on a runc bridge is not refused for what runsc cannot show, and a runc
// thread on a runsc bridge still needs all of it. A nil policy stays nil.
func (pol *PosturePolicy) ForRuntime(rt string) *PosturePolicy {
	if pol == nil || rt != "runsc" {
		return pol
	}
	p := *pol
	p.Seccomp, p.NoNewPrivs, p.Limits = false, false, false
	return &p
}

// Check returns nil if p meets the policy, else a wire.Error of code
// sandbox_unavailable naming every shortfall. A nil policy accepts all.
func (pol *PosturePolicy) Check(p *wire.Posture) error {
	if pol == nil {
		return nil
	}
	if p == nil {
		return wire.Error{Code: wire.CodeSandboxUnavailable, Message: "sandbox refused: its agent reported no posture"}
	}
	var weak []string
	const none = "0000000000000000"
	checks := []struct {
		on, ok bool
		what   string
	}{
		{pol.NonRoot, p.UID != 0 && p.GID != 0, fmt.Sprintf("runs as uid %d gid %d", p.UID, p.GID)},
		{pol.NoCapabilities, p.CapEff == none && p.CapBnd == none, fmt.Sprintf("has capabilities (CapEff %s, CapBnd %s)", p.CapEff, p.CapBnd)},
		{pol.NoNewPrivs, p.NoNewPrivs, "lacks no_new_privs"},
		{pol.Seccomp, p.Seccomp == 2, fmt.Sprintf("seccomp mode %d, not 2", p.Seccomp)},
		{pol.ReadOnlyRoot, p.ReadOnlyRoot, "root filesystem is writable"},
		{pol.Limits, p.PidsMax > 0 && p.MemoryMaxBytes > 0, fmt.Sprintf("limits missing (pids %d, memory %d)", p.PidsMax, p.MemoryMaxBytes)},
	}
	for _, c := range checks {
		if c.on && !c.ok {
			weak = append(weak, c.what)
		}
	}
	if len(weak) == 0 {
		return nil
	}
	return wire.Error{Code: wire.CodeSandboxUnavailable,
		Message: "sandbox refused: its posture is weaker than required: " + strings.Join(weak, "; ")}
}
