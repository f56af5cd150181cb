// Package relay is the agent binary's relay subcommand
// (`boxwire-agent relay`): the sandbox end of the bridge's channel when the
// bridge does not share a host with the sandbox (Kubernetes pods, see
// docs/kubernetes.md and bridge/sandbox/kube).
//
// The bridge starts the relay in the pod over an exec stream and speaks
// yamux on its stdin and stdout. Streams the bridge opens name a socket in
// the pod to connect to (the agent's); for each connection the pod makes
// to a socket the relay serves (the LLM and egress proxies' names under
// /run/boxwire), the relay opens a stream that names it, and the bridge
// connects it to the proxy of that name. The pod needs no network of its
// own: everything travels on the exec stream through the API server.
package relay
