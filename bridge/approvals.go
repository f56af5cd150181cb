package main

import (
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/server"
)

// applyApprovals loads the approval policy file at path, if any, into cfg
// (docs/approvals.md). Credential values may come from the bridge's
// environment (value_env); they never reach a sandbox.
func applyApprovals(cfg *server.Config, path string, getenv func(string) string) error {
	if path == "" {
		return nil
	}
	p, err := policy.Load(path, getenv)
	if err != nil {
		return err
	}
	cfg.Policy = p
	return nil
}
