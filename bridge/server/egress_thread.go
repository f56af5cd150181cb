package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Per-thread egress rules (docs/egress-thread.md). A thread may ask for
// egress rules when it is created (wire.CreateThread.Egress); they add to
// the bridge's allowlist for its sandbox alone, and each must fall within
// Config.EgressThreadMax. The rules belong to the sandbox (box.egress): in
// assistant scope the first thread fixes them and a later thread may ask
// for the same rules or none; PATCH /v1/threads/{id} replaces them later
// (egress_update.go). They are kept in the thread's record, so an adopted
// or replaced sandbox keeps them.

// maxThreadEgressRules bounds the rules one thread may ask for.
const maxThreadEgressRules = 64

// threadEgress validates req.Egress and returns its rules in canonical
// form, sorted and without duplicates (nil when it asks for none): a rule
// that does not parse is a bad_message, one outside the bridge's thread
// cap (or any, when the bridge has none) is not_allowed.
func (s *Server) threadEgress(req wire.CreateThread) ([]string, error) {
	if len(req.Egress) == 0 {
		return nil, nil
	}
	if len(req.Egress) > maxThreadEgressRules {
		return nil, wire.Error{Code: wire.CodeBadMessage,
			Message: fmt.Sprintf("egress: %d rules; a thread may ask for at most %d", len(req.Egress), maxThreadEgressRules)}
	}
	rules, err := egress.ParseRules(req.Egress)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: "egress: " + err.Error()}
	}
	if len(s.cfg.EgressThreadMax) == 0 {
		return nil, wire.Error{Code: wire.CodeNotAllowed,
			Message: "egress: this bridge does not let threads ask for egress rules (its operator sets BOXWIRE_EGRESS_THREAD_MAX)"}
	}
	max, _ := egress.ParseRules(s.cfg.EgressThreadMax) // checked by New
	for _, r := range rules {
		if !max.Covers(r) {
			return nil, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
				"egress: rule %q is outside what this bridge lets a thread ask for (%s)", r.Text, strings.Join(s.cfg.EgressThreadMax, ", "))}
		}
	}
	return canonical(rules), nil
}

// canonical returns the canonical texts of rules, sorted, without
// duplicates; nil for none.
func canonical(rules egress.Rules) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Canonical())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// joinEgress checks that a thread asking for want may join b, a shared
// sandbox that exists already: it must ask for b's rules or none.
func (s *Server) joinEgress(b *box, want []string) error {
	s.mu.Lock()
	have := b.egress
	s.mu.Unlock()
	if len(want) == 0 || slices.Equal(want, have) {
		return nil
	}
	return wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
		"egress: the sandbox of assistant %q has egress rules [%s], fixed by its first thread; a thread may join it asking for those or none, not [%s]",
		b.assistant, strings.Join(have, " "), strings.Join(want, " "))}
}

// setBoxEgress gives b the thread rules (a pooled sandbox at claim).
func (s *Server) setBoxEgress(b *box, rules []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.egress = rules
}

// boxEgress returns a copy of b's thread rules, for the thread's record
// and the threads API.
func (s *Server) boxEgress(b *box) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(b.egress)
}

// egressRulesOf returns the parsed thread rules of the sandbox whose box
// id is id (none when it has none or is gone).
func (s *Server) egressRulesOf(id string) egress.Rules {
	s.mu.Lock()
	var texts []string
	for _, b := range s.boxes {
		if b.id == id {
			texts = b.egress
			break
		}
	}
	s.mu.Unlock()
	rules, _ := egress.ParseRules(texts) // canonical texts of parsed rules
	return rules
}

// withThreadRules wraps the egress decision of sandbox id so that its
// thread rules allow a target as the bridge's allowlist does (the policy's
// host rules still come first, see egressCheck); a refusal nothing decided
// says when the sandbox has no rules at all.
func (s *Server) withThreadRules(id string, check func(context.Context, egress.Request) egress.Verdict) func(context.Context, egress.Request) egress.Verdict {
	return func(ctx context.Context, req egress.Request) egress.Verdict {
		var own egress.Rules
		if req.Kind == egress.KindEgress {
			own = s.egressRulesOf(id)
			if r, ok := own.Match(req.Target); ok && req.AllowedBy == "" {
				req.AllowedBy = r.Text
			}
		}
		v := check(ctx, req)
		if !v.Allowed && v.Rule == "" && req.Kind == egress.KindEgress && len(own) == 0 && len(s.cfg.Egress) == 0 {
			v.Reason += " (this sandbox has no egress rules; a thread asks for them when it is created or with PATCH /v1/threads/{id})"
		}
		return v
	}
}

// adoptEgress gives an adopted sandbox the thread rules its stored
// threads name, dropping any the bridge's thread cap no longer covers, and
// sets them in recs, so the records registered again say what holds now.
func (s *Server) adoptEgress(b *box, recs []ThreadRecord, log *slog.Logger) {
	var texts []string
	for _, r := range recs {
		if len(r.Egress) > 0 {
			texts = r.Egress
			break
		}
	}
	rules, err := egress.ParseRules(texts)
	if err != nil {
		log.Warn("stored egress rules do not parse; the sandbox keeps none", "rules", texts, "err", err)
		rules = nil
	}
	max, _ := egress.ParseRules(s.cfg.EgressThreadMax)
	kept := rules[:0:0]
	for _, r := range rules {
		if max.Covers(r) {
			kept = append(kept, r)
		} else {
			log.Warn("stored egress rule is outside the bridge's thread cap now; dropped", "rule", r.Text)
		}
	}
	now := canonical(kept)
	s.setBoxEgress(b, now)
	for i := range recs {
		recs[i].Egress = now
	}
}
