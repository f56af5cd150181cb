package main

import (
	"crypto/x509"
	"fmt"
	"os"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/server"
)

// applyApprovals loads the approval policy file at path, if any, into cfg
// (docs/approvals.md). Credential values may come from the bridge's
// environment (value_env); they never reach a sandbox.
// BOXWIRE_EGRESS_ROOTS names a PEM file of CA certificates that verify the
// real hosts behind TLS the egress proxy terminates (default: the
// system's roots).
func applyApprovals(cfg *server.Config, path string, getenv func(string) string) error {
	if roots := getenv("BOXWIRE_EGRESS_ROOTS"); roots != "" {
		pem, err := os.ReadFile(roots)
		if err != nil {
			return fmt.Errorf("egress roots: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("egress roots: no certificate in %s", roots)
		}
		cfg.EgressRoots = pool
	}
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
