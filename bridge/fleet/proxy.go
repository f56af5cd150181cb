package fleet

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// proxies serves each sandbox's LLM proxy and egress proxy in its bridge
// folder, with the CA the egress proxy terminates TLS under. It works for
// its fleet: events of the proxies go to the box's members, the box's own
// egress rules come from the fleet's books.
type proxies struct {
	f  *Fleet
	ca caCache // the egress CA, loaded on first use
}

// serveProxy serves a new LLM proxy on llm.sock in the bridge folder.
func (p *proxies) serveProxy(dirs boxdir.Dirs, log *slog.Logger) (*llmproxy.Listener, error) {
	llmCfg := p.f.cfg.LLM
	llmCfg.Logger = log.With("component", "llmproxy")
	llmCfg = p.securedLLM(llmCfg, dirs.ID())
	proxy, err := llmproxy.New(llmCfg)
	if err != nil {
		return nil, err
	}
	ln, err := dirs.Listen(llmSocket)
	if err != nil {
		return nil, err
	}
	return proxy.Serve(ln), nil
}

// sandboxToken is the LLM proxy token of the sandbox with folder name id:
// an HMAC of id under the bridge's client token, so it is stable across
// bridge restarts (adopted sandboxes keep theirs), unguessable, and says
// nothing about the client token. Each proxy accepts only its own.
func (p *proxies) sandboxToken(id string) string {
	m := hmac.New(sha256.New, []byte(p.f.cfg.Token))
	m.Write([]byte("boxwire llm proxy token\x00" + id))
	return hex.EncodeToString(m.Sum(nil))
}

// securedLLM is the LLM proxy config of the sandbox id: its token, and
// its usage and refusals published to its members.
func (p *proxies) securedLLM(cfg llmproxy.Config, id string) llmproxy.Config {
	cfg.Token = p.sandboxToken(id)
	if admit := p.f.cfg.LLMAdmit; admit != nil {
		cfg.Admit = func() error { return admit(id) }
	}
	cfg.OnUsage = func(r llmproxy.UsageReport) {
		if used := p.f.cfg.LLMUsage; used != nil {
			used(id, r.Call.TotalTokens)
		}
		if !p.f.cfg.UsageEvents {
			return // the proxy logs every call
		}
		p.f.publish(id, wire.MustNew(wire.TypeUsage, "", "", wire.UsageReport{
			Model: r.Model, Call: wire.Usage(r.Call), Total: wire.Usage(r.Total),
			Requests: r.Requests, TokenBudget: r.TokenBudget,
		}))
	}
	cfg.OnRefused = func(r llmproxy.Refusal) {
		code := wire.CodeLLM
		if r.Budget {
			code = wire.CodeBudgetExceeded
		}
		p.f.publish(id, wire.ErrorEnvelope("", "", code, "%s", r.Reason))
	}
	return cfg
}

// withThreadRules wraps the egress decision of sandbox id so that its
// thread rules allow a target as the bridge's allowlist does (the policy's
// host rules still come first, see Config.Check); a refusal nothing decided
// says when the sandbox has no rules at all.
func (p *proxies) withThreadRules(id string, check func(context.Context, egress.Request) egress.Verdict) func(context.Context, egress.Request) egress.Verdict {
	return func(ctx context.Context, req egress.Request) egress.Verdict {
		var own egress.Rules
		if req.Kind == egress.KindEgress {
			own = p.f.rules.of(id)
			if r, ok := own.Match(req.Target); ok && req.AllowedBy == "" {
				req.AllowedBy = r.Text
			}
		}
		v := check(ctx, req)
		if !v.Allowed && v.Rule == "" && req.Kind == egress.KindEgress && len(own) == 0 && len(p.f.cfg.Egress) == 0 {
			v.Reason += " (this sandbox has no egress rules; a thread asks for them when it is created or with PATCH /v1/threads/{id})"
		}
		return v
	}
}

// caCache loads the egress CA once, from <DataDir>/ca.
type caCache struct {
	once sync.Once
	ca   *egress.CA
	err  error
}

// egressCA returns the bridge's egress CA, creating it on first use.
func (p *proxies) egressCA() (*egress.CA, error) {
	p.ca.once.Do(func() {
		p.ca.ca, p.ca.err = egress.LoadOrCreateCA(filepath.Join(p.f.cfg.DataDir, "ca"))
	})
	return p.ca.ca, p.ca.err
}

// placeCA writes the bridge's egress CA certificate into a sandbox's
// bridge folder, where the agent reads it at start, and returns the CA.
func (p *proxies) placeCA(dirs boxdir.Dirs) (*egress.CA, error) {
	ca, err := p.egressCA()
	if err != nil {
		return nil, err
	}
	if err := dirs.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		return nil, fmt.Errorf("egress ca certificate: %w", err)
	}
	return ca, nil
}

// egressOn says whether sandboxes get an egress proxy: an allowlist, a
// thread cap (every sandbox then has one), or a policy with credentials,
// host rules or egress_default ask.
func (p *proxies) egressOn() bool {
	pol, cfg := p.f.cfg.Policy, &p.f.cfg
	return len(cfg.Egress) > 0 || len(cfg.EgressThreadMax) > 0 || len(pol.Credentials()) > 0 || pol.EgressDefault() == policy.Ask || pol.HasHostRules()
}

// approvalEnv tells the agent where the CA certificate is, when the proxy
// may terminate TLS.
func (p *proxies) approvalEnv() []string {
	if len(p.f.cfg.Policy.Credentials()) == 0 {
		return nil
	}
	return []string{"BOXWIRE_CA_CERT=" + sandbox.SocketMount + "/" + caFile}
}

// securityEnv is the sandbox environment for the proxies: the egress
// socket when egress is configured, and the CA. It holds no secret: the
// LLM token is handed to the agent in its claim.
func (p *proxies) securityEnv() []string {
	var env []string
	if p.egressOn() {
		env = append(env, "BOXWIRE_EGRESS_SOCKET="+sandbox.SocketMount+"/"+egressSocket)
	}
	return append(env, p.approvalEnv()...)
}

// egressApprovals adds Config.Check, the policy's credentials and the CA
// to the egress proxy of the sandbox of dirs, and puts the CA certificate
// in its bridge folder.
func (p *proxies) egressApprovals(cfg *egress.Config, dirs boxdir.Dirs) error {
	id := dirs.ID()
	pol := p.f.cfg.Policy
	check := p.f.cfg.Check
	if check == nil {
		check = allowlisted
	}
	cfg.Check = func(ctx context.Context, req egress.Request) egress.Verdict {
		return check(ctx, id, req)
	}
	if len(pol.Credentials()) == 0 {
		return nil
	}
	ca, err := p.placeCA(dirs)
	if err != nil {
		return err
	}
	cfg.CA, cfg.UpstreamRoots = ca, p.f.cfg.EgressRoots
	cfg.Credentials = func(t egress.Target) (egress.Credential, bool) {
		c, ok := pol.CredentialFor(t.Host, t.Port)
		return egress.Credential{Name: c.Name, Header: c.Header, Value: c.Value}, ok
	}
	return nil
}

// serveEgress serves the egress proxy in dirs when egress is configured;
// it returns nil, nil when it is not. The proxy decides with the bridge's
// allowlist and policy and the sandbox's own thread rules, looked up at
// each request.
func (p *proxies) serveEgress(dirs boxdir.Dirs, log *slog.Logger) (*egress.Listener, error) {
	if !p.egressOn() {
		return nil, nil
	}
	rules, err := egress.ParseRules(p.f.cfg.Egress)
	if err != nil {
		return nil, err
	}
	id := dirs.ID()
	ecfg := egress.Config{Rules: rules, Logger: log.With("component", "egress"),
		OnDecision: func(d egress.Decision) {
			p.f.publish(id, wire.MustNew(wire.TypeEgress, "", "", wire.EgressDecision{
				Method: d.Method, Host: d.Host, Port: d.Port, Allowed: d.Allowed, Rule: d.Rule, Reason: d.Reason,
			}))
		}}
	if err := p.egressApprovals(&ecfg, dirs); err != nil {
		return nil, err
	}
	ecfg.Check = p.withThreadRules(id, ecfg.Check)
	ln, err := dirs.Listen(egressSocket)
	if err != nil {
		return nil, err
	}
	return egress.New(ecfg).Serve(ln), nil
}

// allowlisted is the egress decision without Config.Check: what a rule
// allows (the bridge's allowlist or the box's own) passes.
func allowlisted(_ context.Context, _ string, req egress.Request) egress.Verdict {
	if req.AllowedBy != "" {
		return egress.Verdict{Allowed: true, Rule: req.AllowedBy}
	}
	return egress.Verdict{Reason: fmt.Sprintf("no egress rule allows %s:%d", req.Target.Host, req.Target.Port)}
}
