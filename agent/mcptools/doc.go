// Package mcptools runs the MCP servers an image declares for use inside
// its sandbox (docs/tools.md, "MCP servers in the image"), and those a
// thread declares (ForThread; "MCP servers a thread declares"):
// third-party tools that need no secret, in the same boundary as the
// shell. The agent reads the image's file (DefaultFile); a thread's come
// from its bridge at each turn's start. Each server is a command started
// on first use (again after it ended) with internal/mcpclient's own
// stdio client (mcpclient.DialCommand; the agent does not link the
// official MCP Go SDK); its tools are offered to the model beside the
// agent's own, and a call's context ending cancels it on the server.
// [Servers.Close] ends them all.
package mcptools
