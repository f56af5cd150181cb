package cli

import (
	"log/slog"

	"github.com/boxwire/boxwire/agent/mcptools"
)

// imageMCP returns the MCP servers the image declares (BOXWIRE_MCP_FILE,
// default mcptools.DefaultFile; docs/tools.md). A broken file is logged and
// the agent serves without them. Their commands get PATH, HOME and LANG of
// the agent's environment and env (the egress proxy's), nothing else.
func imageMCP(getenv func(string) string, workspace string, env []string, limit int, log *slog.Logger) *mcptools.Servers {
	file := getenv("BOXWIRE_MCP_FILE")
	if file == "" {
		file = mcptools.DefaultFile
	}
	servers, err := mcptools.Load(file)
	if err != nil {
		log.Error("the image's MCP servers are not offered", "err", err)
	}
	if len(servers) > 0 {
		log.Info("the image's MCP servers", "file", file, "servers", len(servers))
	}
	var base []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v := getenv(k); v != "" {
			base = append(base, k+"="+v)
		}
	}
	return mcptools.New(mcptools.Config{Servers: servers, Env: append(base, env...), Dir: workspace, OutputLimit: limit, Logger: log})
}
