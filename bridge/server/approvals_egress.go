package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// caFile is the egress CA certificate's name in each socket folder; the
// agent points the usual TLS trust variables at it (agent/trust).
const caFile = "ca.pem"

// caCache loads the egress CA once, from <DataDir>/ca.
type caCache struct {
	once sync.Once
	ca   *egress.CA
	err  error
}

// egressCA returns the bridge's egress CA, creating it on first use.
func (s *Server) egressCA() (*egress.CA, error) {
	s.ca.once.Do(func() {
		s.ca.ca, s.ca.err = egress.LoadOrCreateCA(filepath.Join(s.cfg.DataDir, "ca"))
	})
	return s.ca.ca, s.ca.err
}

// placeCA writes the bridge's egress CA certificate into a sandbox's
// bridge folder, where the agent reads it at start, and returns the CA.
func (s *Server) placeCA(dirs boxdir.Dirs) (*egress.CA, error) {
	ca, err := s.egressCA()
	if err != nil {
		return nil, err
	}
	if err := dirs.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		return nil, fmt.Errorf("egress ca certificate: %w", err)
	}
	return ca, nil
}

// egressOn says whether sandboxes get an egress proxy: an allowlist, a
// thread cap (every sandbox then has one, egress_thread.go), or a policy
// with credentials, host rules or egress_default ask.
func (s *Server) egressOn() bool {
	p := s.cfg.Policy
	return len(s.cfg.Egress) > 0 || len(s.cfg.EgressThreadMax) > 0 || len(p.Credentials()) > 0 || p.EgressDefault() == policy.Ask || p.HasHostRules()
}

// approvalEnv tells the agent where the CA certificate is, when the proxy
// may terminate TLS.
func (s *Server) approvalEnv() []string {
	if len(s.cfg.Policy.Credentials()) == 0 {
		return nil
	}
	return []string{"BOXWIRE_CA_CERT=" + sandbox.SocketMount + "/" + caFile}
}

// egressApprovals adds the policy's decisions, credentials and CA to the
// egress proxy of the sandbox of dirs, and puts the CA certificate in its
// bridge folder.
func (s *Server) egressApprovals(cfg *egress.Config, dirs boxdir.Dirs) error {
	id := dirs.ID()
	pol := s.cfg.Policy
	cfg.Check = func(ctx context.Context, req egress.Request) egress.Verdict {
		return s.egressCheck(ctx, id, req)
	}
	if len(pol.Credentials()) == 0 {
		return nil
	}
	ca, err := s.placeCA(dirs)
	if err != nil {
		return err
	}
	cfg.CA, cfg.UpstreamRoots = ca, s.cfg.EgressRoots
	cfg.Credentials = func(t egress.Target) (egress.Credential, bool) {
		c, ok := pol.CredentialFor(t.Host, t.Port)
		return egress.Credential{Name: c.Name, Header: c.Header, Value: c.Value}, ok
	}
	return nil
}

// egressCheck decides one egress request of sandbox id: a policy host
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
	s.mu.Lock()
	defer s.mu.Unlock()
	var threads []*thread
	for _, b := range s.boxes {
		if b.id == id {
			for _, t := range b.threads {
				threads = append(threads, t)
			}
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
