// Package boxproxy serves each sandbox's two proxies in its bridge folder
// (bridge/boxdir): the LLM proxy (bridge/llmproxy), which holds the key
// and accepts only the sandbox's own token, and, when egress is
// configured, the allowlisting egress proxy (bridge/egress), with the CA
// it terminates TLS under. It also validates the egress rules a thread
// asks for beside the bridge's allowlist ([ThreadRules]).
//
// The fleet (bridge/fleet) makes one [Proxies] and calls it for every box
// it starts, claims from the pool or adopts; the box id is the sandbox
// folder's name. What the proxies report (usage, refusals, egress
// decisions) goes back through [Config.Publish], and each egress request
// asks [Config.Rules] for the box's own rules at that moment, so the
// package keeps no books of boxes. A Proxies is safe for concurrent use;
// each listener it returns serves from a goroutine it owns until closed.
package boxproxy
