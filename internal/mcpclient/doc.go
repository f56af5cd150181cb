// Package mcpclient is what boxwire's two Model Context Protocol clients
// share: the agent's, for the MCP servers an image or a thread declares
// inside the sandbox (agent/mcptools), and the bridge's, for the host
// tools it runs outside every sandbox (bridge/hosttools).
//
//   - [Parse] and [Check] read and check in-sandbox server declarations
//     (wire.MCPServers, docs/tools.md); [CheckName], [CheckOffer] and
//     [MatchAny] are the checks and matching every declaration shares.
//   - [DialCommand] is a small MCP client of its own for a server that is
//     a command (the stdio transport: JSON-RPC 2.0, one message a line):
//     the initialize handshake, tools/list with its pages, tools/call with
//     cancellation and progress, ping, tools/list_changed, the server's
//     stderr kept for the error that says why it ended, and the stdio
//     shutdown (stdin closed, then SIGTERM, then SIGKILL). The agent uses
//     it and nothing else, so that it does not link the official MCP Go
//     SDK (1.6 MiB of binary, about 1.4 MiB of idle RSS, BENCHMARKS.md);
//     its tests run it against servers written with that SDK.
//   - A [Session] is one initialized session, the command client's or the
//     bridge's SDK sessions behind an adapter; a [Conn] keeps one server's
//     session: connected on first use, again after it ended, its tool list
//     cached; a [Group] owns its Conns' session watchers and ends them all
//     ([Group.Close]).
//   - [Text], [Schema] and [Ended] read a tool's result, a tool's input
//     schema and a call's error; [Tail] keeps the end of a server's stderr.
//
// It imports only bridge/wire of boxwire's packages and nothing outside
// the standard library, so that the agent and the bridge can both use it
// without importing each other.
package mcpclient
