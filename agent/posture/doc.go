// Package posture reads the agent's own confinement from /proc and the
// cgroup files — uid, capabilities, no_new_privs, seccomp mode, read-only
// root, pids/memory/CPU limits — for the hello the agent sends the bridge.
// Reading never fails as a whole: what cannot be read is listed in
// Posture.Errors, and a bridge that requires it refuses the sandbox.
package posture
