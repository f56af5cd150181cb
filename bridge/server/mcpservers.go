package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// MCP servers a thread declares (docs/tools.md): its creator names them
// in CreateThread.MCP, checked here before anything is made; the thread's
// record keeps them (so a resumed, adopted or taken-over thread has them
// too), and each host_tools answer (hosttools.go) hands them to the
// agent, which runs them in the sandbox beside the image's.

// checkThreadMCP refuses a declaration that does not check, with
// bad_message naming the server and field.
func checkThreadMCP(raw []byte) error {
	if _, err := mcpclient.Parse(raw); err != nil {
		return wire.Error{Code: wire.CodeBadMessage, Message: "mcp: " + err.Error()}
	}
	return nil
}

// threadMCP returns the MCP servers the thread declared, read from its
// record; none when it has none or the record cannot be read (logged).
func (t *thread) threadMCP(ctx context.Context) []wire.MCPServer {
	rec, ok, err := t.srv.cfg.Store.Get(ctx, t.id)
	if err != nil || !ok || len(rec.MCP) == 0 {
		if err != nil {
			t.log.Warn("the thread's MCP servers are not offered this turn: its record", "err", err)
		}
		return nil
	}
	servers, err := mcpclient.Parse(rec.MCP)
	if err != nil { // checked at its creation: only a record from elsewhere
		t.log.Warn("the thread's MCP servers no longer check; none are offered", "err", err)
		return nil
	}
	out := make([]wire.MCPServer, len(servers))
	for i, s := range servers {
		out[i] = s.MCPServer
	}
	return out
}
