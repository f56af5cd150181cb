// Package hosttools runs the operator's host tools: Model Context
// Protocol servers the bridge starts on the host (a stdio command with its
// own environment) or reaches over streamable HTTP (with a credential in
// its headers), outside every sandbox, so that a tool's secret never
// enters one (docs/tools.md, "Host tools"; docs/security.md).
//
// [Load] reads the operator's file; [New] makes a [Host] of it, which
// lists the tools a thread may use ([Host.Tools], limited by image, user
// and thread) and calls them ([Host.Call]) with the official MCP Go SDK:
// a call's context ending cancels it on the server
// (notifications/cancelled), and every result is redacted of the secrets
// the bridge knows before it is returned. Servers are connected on first
// use and again after they end; [Host.Close] ends them all.
package hosttools
