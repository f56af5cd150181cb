package mcptools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

// DefaultFile is where an image declares its MCP servers.
const DefaultFile = "/etc/boxwire/mcp.json"

// DefaultTimeout bounds one call when a server names none.
const DefaultTimeout = mcpclient.DefaultTimeout

// Server is one checked MCP server declaration (wire.MCPServer and its
// call timeout).
type Server = mcpclient.Server

// Load reads the MCP file at path. A missing file declares no servers (nil,
// nil); any other problem is an error naming the server and field.
func Load(file string) ([]Server, error) {
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp servers: %w", err)
	}
	servers, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("mcp servers %s: %w", file, err)
	}
	return servers, nil
}

// Parse reads an MCP file's JSON (see Load): wire.MCPServers, checked
// by mcpclient.Parse.
func Parse(raw []byte) ([]Server, error) { return mcpclient.Parse(raw) }
