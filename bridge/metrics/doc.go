// Package metrics is the bridge's GET /metrics: its registry, in the
// Prometheus exposition formats written by the Prometheus client library
// (github.com/prometheus/client_golang).
//
// Each [Metrics] has a registry of its own, never the library's global
// one, so several bridges run in one process (tests do) without sharing a
// series. Two kinds of metric are in it:
//
//   - what the bridge already knows — its live threads and their agent
//     builds, its sandboxes by state, the store's threads, connections,
//     leases, the store's append latency — read once per scrape from the
//     [State] a [Source] returns (the server fills it; no engine is asked);
//   - what happens between scrapes — model calls (latency by model and
//     outcome, tokens) and egress decisions — counted as they happen
//     ([Metrics.ModelCall], [Metrics.Egress]), and the client connections
//     being served ([Metrics.Clients]).
//
// The Go runtime's and the process's own metrics (go_*, process_*) are
// there too. The names are in docs/lifecycle.md ("Metrics").
//
// The server guards the route (admins only). This package imports nothing
// of the bridge.
package metrics
