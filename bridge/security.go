package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
)

// applySecurity sets the security parts of cfg from the environment:
//
//	BOXWIRE_EGRESS_ALLOW      comma-separated egress rules (empty: no network)
//	BOXWIRE_LLM_MODELS        comma-separated model allowlist (empty: any)
//	BOXWIRE_LLM_RPM           model calls per minute per sandbox (0: no cap)
//	BOXWIRE_LLM_TOKEN_BUDGET  total tokens per sandbox (0: no cap)
//	BOXWIRE_LLM_TOKEN_TTL     how long a sandbox's LLM proxy token is good (default 15m; rotated at half)
//	BOXWIRE_USAGE_EVENTS      1 publishes a usage event after every model call
//	BOXWIRE_POSTURE           strict (default) or off
//
// The posture check is made per sandbox under its own runtime (see
// server.PosturePolicy.ForRuntime): runsc ignores the engine's seccomp
// option, so seccomp is not required there.
func applySecurity(cfg *server.Config, getenv func(string) string) error {
	cfg.Egress = splitList(getenv("BOXWIRE_EGRESS_ALLOW"))
	cfg.LLM.Models = splitList(getenv("BOXWIRE_LLM_MODELS"))
	var err error
	if cfg.LLM.RequestsPerMinute, err = atoi(getenv, "BOXWIRE_LLM_RPM"); err != nil {
		return err
	}
	if cfg.LLM.TokenBudget, err = atoi(getenv, "BOXWIRE_LLM_TOKEN_BUDGET"); err != nil {
		return err
	}
	if v := getenv("BOXWIRE_LLM_TOKEN_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("BOXWIRE_LLM_TOKEN_TTL=%q: want a duration of at least 1s", v)
		}
		cfg.LLM.TokenTTL = d
	}
	cfg.UsageEvents = getenv("BOXWIRE_USAGE_EVENTS") == "1"
	switch p := getenv("BOXWIRE_POSTURE"); p {
	case "", "strict":
		cfg.Posture = server.StrictPosture()
	case "off":
		cfg.Posture = nil
	default:
		return fmt.Errorf("BOXWIRE_POSTURE=%q: want strict or off", p)
	}
	return nil
}

func atoi(getenv func(string) string, key string) (int, error) {
	v := getenv(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a number of at least 0", key, v)
	}
	return n, nil
}
