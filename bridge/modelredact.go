package main

import "github.com/boxwire/boxwire/bridge/server"

// applyModelRedaction has every sandbox's LLM proxy mask, in the tool
// output the agent sends the model, what the bridge always masks for
// clients and the log — the policy's redact values, credentials and
// redact_patterns, and the common key shapes — and the secrets the bridge
// holds itself: its token, the model key and the host tools' secrets
// (docs/approvals.md, "Redaction"). The model is told when something was
// masked.
func applyModelRedaction(cfg *server.Config) {
	secrets := []string{cfg.Token, cfg.LLM.APIKey}
	if cfg.HostTools != nil {
		secrets = append(secrets, cfg.HostTools.Secrets()...)
	}
	cfg.LLM.RedactForModel = cfg.Policy.Redactor().With(secrets, nil).RedactCount
}
