package main

import (
	"flag"
	"log/slog"

	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/server"
)

// hostToolsOptions name the operator's host tools file (docs/tools.md,
// "Host tools").
type hostToolsOptions struct {
	hostTools string // --host-tools
}

func (o *hostToolsOptions) hostToolsFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.hostTools, "host-tools", getenv("BOXWIRE_HOST_TOOLS"), "JSON file of MCP servers the bridge runs on the host as tools the agents may call (docs/tools.md)")
}

// applyHostTools loads the host tools file, if any, into cfg; the
// servers' secrets may come from the bridge's environment. The bridge's
// token and model key are masked in every host tool result too. Then it
// sets what is masked before the model sees tool output
// (applyModelRedaction, which needs the policy and the host tools).
func (o hostToolsOptions) applyHostTools(cfg *server.Config, getenv func(string) string, log *slog.Logger) error {
	if o.hostTools != "" {
		servers, err := hosttools.Load(o.hostTools, getenv)
		if err != nil {
			return err
		}
		cfg.HostTools = hosttools.New(hosttools.Config{
			Servers: servers, Secrets: []string{cfg.Token, cfg.LLM.APIKey},
			Getenv: getenv, Software: cfg.Software, Logger: log,
		})
		log.Info("host tools", "servers", len(servers))
	}
	applyModelRedaction(cfg) // modelredact.go
	return nil
}
