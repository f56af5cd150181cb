// Package trust makes the sandbox's tools trust the bridge's egress CA, so
// that the egress proxy can terminate TLS to add host-held credentials
// (docs/approvals.md). It writes one bundle (the system's roots plus the
// CA) and returns the environment that points the usual tools at it.
package trust
