package boxproxy

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Per-thread egress rules (docs/egress-thread.md): a thread may ask for
// rules that add to the bridge's allowlist for its sandbox alone, each
// within the bridge's thread cap. The fleet keeps them per box and the
// egress proxy asks for them at each request (Config.Rules).

// maxThreadEgressRules bounds the rules one thread may ask for.
const maxThreadEgressRules = 64

// ThreadRules validates the egress rules a thread asks for against
// threadMax, the bridge's thread cap, and returns them in canonical form, sorted and
// without duplicates (nil when it asks for none): a rule that does not
// parse is a bad_message (a wire.Error), one outside threadMax (or any,
// when it is empty) is not_allowed. threadMax must parse.
func ThreadRules(asked, threadMax []string) ([]string, error) {
	if len(asked) == 0 {
		return nil, nil
	}
	if len(asked) > maxThreadEgressRules {
		return nil, wire.Error{Code: wire.CodeBadMessage,
			Message: fmt.Sprintf("egress: %d rules; a thread may ask for at most %d", len(asked), maxThreadEgressRules)}
	}
	rules, err := egress.ParseRules(asked)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: "egress: " + err.Error()}
	}
	if len(threadMax) == 0 {
		return nil, wire.Error{Code: wire.CodeNotAllowed,
			Message: "egress: this bridge does not let threads ask for egress rules (its operator sets BOXWIRE_EGRESS_THREAD_MAX)"}
	}
	allowed, _ := egress.ParseRules(threadMax) // checked by fleet.New
	for _, r := range rules {
		if !allowed.Covers(r) {
			return nil, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
				"egress: rule %q is outside what this bridge lets a thread ask for (%s)", r.Text, strings.Join(threadMax, ", "))}
		}
	}
	return Canonical(rules), nil
}

// Canonical returns the canonical texts of rules, sorted, without
// duplicates; nil for none.
func Canonical(rules egress.Rules) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Canonical())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AdoptedRules returns, in canonical form, the thread rules an adopted
// sandbox keeps of texts (what its stored threads named): none when they
// do not parse, and only those threadMax (the bridge's thread cap) still
// covers; log says what is dropped.
func AdoptedRules(texts, threadMax []string, log *slog.Logger) []string {
	rules, err := egress.ParseRules(texts)
	if err != nil {
		log.Warn("stored egress rules do not parse; the sandbox keeps none", "rules", texts, "err", err)
		rules = nil
	}
	max, _ := egress.ParseRules(threadMax)
	kept := rules[:0:0]
	for _, r := range rules {
		if max.Covers(r) {
			kept = append(kept, r)
		} else {
			log.Warn("stored egress rule is outside the bridge's thread cap now; dropped", "rule", r.Text)
		}
	}
	return Canonical(kept)
}
