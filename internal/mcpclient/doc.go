// Package mcpclient is what boxwire's two Model Context Protocol clients
// share: the agent's, for the MCP servers an image or a thread declares
// inside the sandbox (agent/mcptools), and the bridge's, for the host
// tools it runs outside every sandbox (bridge/hosttools). Both use the
// official MCP Go SDK.
//
//   - [Parse] and [Check] read and check in-sandbox server declarations
//     (wire.MCPServers, docs/tools.md); [CheckName], [CheckOffer] and
//     [MatchAny] are the checks and matching every declaration shares.
//   - A [Conn] keeps one server's session: connected on first use, again
//     after it ended, its tool list cached; a [Group] owns its Conns'
//     session watchers and ends them all ([Group.Close]).
//   - [Text], [Schema] and [Ended] read a tool's result, a tool's input
//     schema and a call's error.
//
// It imports only bridge/wire of boxwire's packages, so that the agent
// and the bridge can both use it without importing each other.
package mcpclient
