// Package mcptools runs the MCP servers an image declares for use inside
// its sandbox (docs/tools.md, "MCP servers in the image"): third-party
// tools that need no secret, in the same boundary as the shell. The agent
// reads the image's file (DefaultFile), starts each server as a command
// on first use (again after it ended) with the official MCP Go SDK, lists
// its tools and offers them to the model beside its own; a call's context
// ending cancels it on the server. [Servers.Close] ends them all.
package mcptools
