package approval

import (
	"encoding/json"
	"log/slog"

	"github.com/boxwire/boxwire/bridge/policy"
)

// StoredPolicy is the policy of a thread the bridge takes back from its
// record (adoption after a restart, resumption of a suspended thread):
// the rules its creator gave (ThreadPolicy), parsed again over base, the
// bridge's current policy; nil (the bridge's) when it had none. Rules that
// no longer parse fall back to the bridge's policy, and log says so.
func StoredPolicy(base *policy.Policy, rules json.RawMessage, log *slog.Logger) *policy.Policy {
	p, err := ThreadPolicy(base, rules)
	if err != nil {
		log.Warn("thread policy no longer parses; the bridge's applies", "err", err)
		return nil
	}
	return p
}
