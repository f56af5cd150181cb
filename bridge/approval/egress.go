package approval

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// CheckEgress decides one egress request of a sandbox (the fleet's
// Config.Check, after the sandbox's own rules matched) whose threads'
// gates are gates: a policy host rule, else the allowlist, else a
// configured credential's host, else egress_default (deny, or ask).
// Credential uses follow the credential rules. The first gate's policy
// decides; base, the bridge's, when the sandbox has no thread. Asking
// holds the request until a client of one of the threads answers.
func CheckEgress(ctx context.Context, gates []*Gate, base *policy.Policy, req egress.Request) egress.Verdict {
	pol := base
	if len(gates) > 0 {
		pol = gates[0].Policy()
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
		ok, reason := Decide(ctx, gates, pol, action, d) // audited: a rule always names it
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
	ok, reason := Decide(ctx, gates, pol, action, d)
	return egress.Verdict{Allowed: ok, Rule: d.Rule, Reason: reason}
}

// ThreadPolicy is the policy of a thread that brings rules of its own
// (wire.CreateThread.Policy): base, the bridge's, with the rules in
// front; nil when rules is empty. Rules that do not parse are a
// wire.Error of code bad_message.
func ThreadPolicy(base *policy.Policy, rules json.RawMessage) (*policy.Policy, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	parsed, err := policy.ParseRules(rules)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	if base == nil {
		base, _ = policy.New(policy.File{})
	}
	p, err := base.WithRules(parsed)
	if err != nil {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	return p, nil
}
