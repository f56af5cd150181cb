// Package sandbox creates, inspects and removes the containers that agents
// run in.
//
// Manager is the engine-neutral interface the bridge uses; nothing above it
// knows which engine runs a sandbox. Docker implements it on the Docker
// Engine API (github.com/moby/moby/client), negotiating the API version down
// to what the engine speaks.
//
// Every sandbox Docker creates is hardened the same way: no network
// (NetworkMode none), all capabilities dropped, no-new-privileges, a
// read-only root filesystem with a sized tmpfs at /tmp, and pids, memory and
// CPU limits. The only way in or out is the host folder bind-mounted at
// SocketMount, which holds unix sockets; the workspace is an optional named
// volume at WorkspaceMount that outlives the container.
//
// With DockerConfig.Workspace set, a new workspace volume is capped: an
// ext4 filesystem in a sparse image file on a loop device (workspace.go),
// so that filling it ends in ENOSPC inside the sandbox, not on the host.
// RemoveVolume detaches and deletes the image; Create attaches it again
// when it was detached (a reboot). CheckWorkspaces tells at start-up
// whether the host can; ParseSize reads sizes such as "10GiB".
//
// SeccompProfile builds boxwire's seccomp profile (the moby default with
// DeniedSyscalls denied); the labels in labels.go are what the bridge puts
// on every container and volume.
//
// Errors that callers act on wrap the sentinels ErrEngineUnavailable,
// ErrNotFound and ErrImageNotFound; test for them with errors.Is.
package sandbox
