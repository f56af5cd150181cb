// Package hosttool offers the model the host tools its bridge allows the
// thread (docs/tools.md, "Host tools"): each is a tool.Tool whose Run
// sends the call to the bridge through a Caller (agent/session's, over the
// agent's own connection) and waits for the MCP server's result. Nothing
// of the tool — its process, its credential — is in the sandbox; the
// agent sees only the name, description, schema and redacted results.
package hosttool
