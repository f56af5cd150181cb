package wire

// MCP servers inside the sandbox (docs/tools.md, "MCP servers in the
// image" and "MCP servers a thread declares"): stdio commands the agent
// starts in the sandbox, as its user, for third-party tools that need no
// secret. An image declares them in /etc/boxwire/mcp.json; a thread's
// creator in CreateThread.MCP, in the same JSON; the bridge hands a
// thread's to its agent in HostTools.MCPServers. The checks (names,
// globs, timeouts) are internal/mcpclient's.

// MCPServers is the JSON of an MCP servers declaration: the image's file
// and CreateThread.MCP.
type MCPServers struct {
	// Servers are the MCP servers, in the order their tools are offered.
	Servers []MCPServer `json:"servers"`
}

// MCPServer is one stdio MCP server run inside the sandbox.
type MCPServer struct {
	// Name identifies it in logs and errors: 1-64 letters, digits, "_" or
	// "-", unique in its declaration.
	Name string `json:"name"`
	// Command is the program and its arguments.
	Command []string `json:"command"`
	// Env adds to the command's environment (PATH, HOME, LANG and the
	// egress proxy's variables). It holds no secret: the sandbox can read
	// it, and so can the model.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the command's working directory (default the workspace).
	Dir string `json:"dir,omitempty"`
	// Prefix is put in front of each tool's name as the model sees it.
	Prefix string `json:"prefix,omitempty"`
	// Tools, when set, are globs on the server's tool names: only those
	// are offered.
	Tools []string `json:"tools,omitempty"`
	// Timeout bounds one call, a Go duration such as "2m" (default 10m).
	Timeout string `json:"timeout,omitempty"`
}
