// Package kube is a [sandbox.Manager] on Kubernetes: a pod per sandbox,
// made with k8s.io/client-go in one namespace.
//
// Every pod is hardened like the Docker path's containers: a numeric
// non-root user, every capability dropped, no privilege escalation, a
// read-only root filesystem with sized memory-backed emptyDirs at /tmp and
// the socket folders, seccomp RuntimeDefault (or a Localhost profile),
// the RuntimeClass when one is configured, CPU and memory requests and
// limits, no ServiceAccount token and no service links. The bridge's
// labels go on the pod (those Kubernetes accepts as label values) and all
// of them, exactly, in its annotations. The workspace is a
// PersistentVolumeClaim, which outlives the pod, or an emptyDir.
//
// The pod needs no network: the bridge reaches it through the API server
// (tunnel.go). Once the pod runs, the manager starts the agent binary's
// relay in it over an exec stream and multiplexes that stream (yamux):
// the host socket the fleet dials (<agent folder>/agent.sock) is a
// listener of the manager whose connections become streams to the agent's
// socket in the pod, and the pod's connections to the relay's sockets
// under /run/boxwire (the LLM and egress proxies) become streams to the
// bridge's proxies in the sandbox's bridge folder. The regular files of
// that folder (the egress CA certificate) go into a ConfigMap mounted
// read-only over their names. docs/kubernetes.md has the whole picture.
package kube
