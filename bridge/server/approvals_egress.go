package server

import (
	"context"
	"strconv"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// egressCheck decides one egress request of sandbox id (the fleet's
// Config.Check, after the sandbox's own rules matched): a policy host
// rule, else the allowlist, else a configured credential's host, else
// egress_default (deny, or ask). Credential uses follow the credential
// rules. Asking holds the request until a client of one of the sandbox's
// threads answers.
func (s *Server) egressCheck(ctx context.Context, id string, req egress.Request) egress.Verdict {
	threads := s.boxThreads(id)
	pol := s.cfg.Policy
	if len(threads) > 0 {
		pol = threads[0].policy()
	}
	action := wire.ApprovalAction{Kind: wire.ApprovalEgress, Method: req.Method, Host: req.Target.Host,
		Port: req.Target.Port, URL: req.URL, Credential: req.Credential}
	var d policy.Decision
	if req.Kind == egress.KindCredential {
		action.Kind = wire.ApprovalCredential
		d = pol.Credential(req.Credential)
		if d.Rule == "" {
			d.Rule = "credential " + req.Credential
		}
		ok, reason := decideWith(ctx, threads, pol, action, d) // audited: a rule always names it
		return egress.Verdict{Allowed: ok, Rule: d.Rule, Reason: reason}
	}
	if hd, ok := pol.Egress(req.Target.Host, req.Target.Port); ok {
		d = hd
	} else if req.AllowedBy != "" {
		return egress.Verdict{Allowed: true, Rule: req.AllowedBy}
	} else if req.Credential != "" {
		return egress.Verdict{Allowed: true, Rule: "credential " + req.Credential}
	} else if pol.EgressDefault() == policy.Ask {
		d = policy.Decision{Action: policy.Ask, Rule: "egress_default ask"}
	} else {
		return egress.Verdict{Reason: "no egress rule allows " + req.Target.Host + ":" + strconv.Itoa(req.Target.Port)}
	}
	ok, reason := decideWith(ctx, threads, pol, action, d)
	return egress.Verdict{Allowed: ok, Rule: d.Rule, Reason: reason}
}

// boxThreads returns the threads of the sandbox whose id is id.
func (s *Server) boxThreads(id string) []*thread {
	var threads []*thread
	for _, m := range s.fleet.Members(id) {
		if t, ok := m.(*thread); ok {
			threads = append(threads, t)
		}
	}
	return threads
}

// threadPolicy is the policy of a thread created with req: the bridge's,
// with req.Policy's rules in front; nil when req brings none.
func (s *Server) threadPolicy(req wire.CreateThread) (*policy.Policy, error) {
	if len(req.Policy) == 0 {
		return nil, nil
	}
	rules, err := policy.ParseRules(req.Policy)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	base := s.cfg.Policy
	if base == nil {
		base, _ = policy.New(policy.File{})
	}
	p, err := base.WithRules(rules)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	return p, nil
}

// storedPolicy is the policy of a thread the bridge takes back from its
// record (adoption after a restart, resumption of a suspended thread):
// the one its creator gave, parsed again over the bridge's current
// policy; nil (the bridge's) when it had none. A record whose rules no
// longer parse falls back to the bridge's policy, and says so in the log.
func (s *Server) storedPolicy(rec ThreadRecord) *policy.Policy {
	p, err := s.threadPolicy(wire.CreateThread{Policy: rec.Policy})
	if err != nil {
		s.log.Warn("thread policy no longer parses; the bridge's applies", "thread", rec.ID, "err", err)
		return nil
	}
	return p
}
