package boxproxy

import (
	"context"
	"crypto/x509"
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

// The names of what a sandbox's bridge folder holds for its agent.
const (
	// LLMSocket is the LLM proxy's socket.
	LLMSocket = "llm.sock"
	// EgressSocket is the egress proxy's socket.
	EgressSocket = "egress.sock"
	// CAFile is the egress CA certificate; the agent points the usual TLS
	// trust variables at it (agent/trust).
	CAFile = "ca.pem"
)

// Config configures the proxies of every sandbox of one fleet. The fleet
// fills it from its own Config (see fleet.Config for each field).
type Config struct {
	// LLM configures each LLM proxy; Token is the secret each sandbox's
	// LLM token derives from (SandboxToken).
	LLM   llmproxy.Config
	Token string
	// UsageEvents publishes a usage event after every model call.
	UsageEvents bool
	// LLMAdmit and LLMUsage: see fleet.Config.
	LLMAdmit func(box string) error
	LLMUsage func(box string, tokens int)
	// Egress is the bridge's allowlist, EgressThreadMax the thread cap.
	Egress, EgressThreadMax []string
	// Policy and EgressRoots: see fleet.Config.
	Policy      *policy.Policy
	EgressRoots *x509.CertPool
	// DataDir holds the egress CA (<DataDir>/ca).
	DataDir string
	// Check decides an egress request after the box's own rules were
	// matched; nil leaves it to the allowlist.
	Check func(ctx context.Context, box string, req egress.Request) egress.Verdict
	// Decided, when set, is told each egress decision besides the event
	// published to the box's members; it must not block.
	Decided func(egress.Decision)
	// Publish adds env, an event of box's proxies, to the logs of the
	// box's members; it must not block on clients. Required.
	Publish func(box string, env wire.Envelope)
	// Rules returns box's own egress rules now (none for a box that is
	// gone). Required.
	Rules func(box string) egress.Rules
}

// Proxies serves each sandbox's LLM proxy and egress proxy in its bridge
// folder, with the CA the egress proxy terminates TLS under.
type Proxies struct {
	cfg    Config
	ca     caCache   // the egress CA, loaded on first use
	tokens tokenBook // each box's LLM tokens (tokens.go)
}

// New returns the proxies of cfg; it serves nothing until asked.
func New(cfg Config) *Proxies { return &Proxies{cfg: cfg} }

// ServeLLM serves a new LLM proxy on LLMSocket in the bridge folder of
// dirs, for the box of that folder's name.
func (p *Proxies) ServeLLM(dirs boxdir.Dirs, log *slog.Logger) (*llmproxy.Listener, error) {
	llmCfg := p.cfg.LLM
	llmCfg.Logger = log.With("component", "llmproxy")
	llmCfg = p.securedLLM(llmCfg, dirs.ID())
	proxy, err := llmproxy.New(llmCfg)
	if err != nil {
		return nil, err
	}
	ln, err := dirs.Listen(LLMSocket)
	if err != nil {
		return nil, err
	}
	return proxy.Serve(ln), nil
}

// securedLLM is the LLM proxy config of the sandbox id: its token, and
// its usage and refusals published to its members.
func (p *Proxies) securedLLM(cfg llmproxy.Config, id string) llmproxy.Config {
	p.FreshTokens(id) // a new proxy is a new sandbox on the box: earlier tokens are refused (tokens.go)
	cfg.Token, cfg.Accept = "", func(tok string) bool { return p.acceptsToken(id, tok) }
	if admit := p.cfg.LLMAdmit; admit != nil {
		cfg.Admit = func() error { return admit(id) }
	}
	cfg.OnUsage = func(r llmproxy.UsageReport) {
		if used := p.cfg.LLMUsage; used != nil {
			used(id, r.Call.TotalTokens)
		}
		if !p.cfg.UsageEvents {
			return // the proxy logs every call
		}
		p.cfg.Publish(id, wire.MustNew(wire.TypeUsage, "", "", wire.UsageReport{
			Model: r.Model, Call: wire.Usage(r.Call), Total: wire.Usage(r.Total),
			Requests: r.Requests, TokenBudget: r.TokenBudget,
		}))
	}
	cfg.OnRefused = func(r llmproxy.Refusal) {
		code := wire.CodeLLM
		if r.Budget {
			code = wire.CodeBudgetExceeded
		}
		p.cfg.Publish(id, wire.ErrorEnvelope("", "", code, "%s", r.Reason))
	}
	return cfg
}

// withThreadRules wraps the egress decision of sandbox id so that its
// thread rules allow a target as the bridge's allowlist does (the policy's
// host rules still come first, see Config.Check); a refusal nothing decided
// says when the sandbox has no rules at all.
func (p *Proxies) withThreadRules(id string, check func(context.Context, egress.Request) egress.Verdict) func(context.Context, egress.Request) egress.Verdict {
	return func(ctx context.Context, req egress.Request) egress.Verdict {
		var own egress.Rules
		if req.Kind == egress.KindEgress {
			own = p.cfg.Rules(id)
			if r, ok := own.Match(req.Target); ok && req.AllowedBy == "" {
				req.AllowedBy = r.Text
			}
		}
		v := check(ctx, req)
		if !v.Allowed && v.Rule == "" && req.Kind == egress.KindEgress && len(own) == 0 && len(p.cfg.Egress) == 0 {
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
func (p *Proxies) egressCA() (*egress.CA, error) {
	p.ca.once.Do(func() {
		p.ca.ca, p.ca.err = egress.LoadOrCreateCA(filepath.Join(p.cfg.DataDir, "ca"))
	})
	return p.ca.ca, p.ca.err
}

// placeCA writes the bridge's egress CA certificate into a sandbox's
// bridge folder, where the agent reads it at start, and returns the CA.
func (p *Proxies) placeCA(dirs boxdir.Dirs) (*egress.CA, error) {
	ca, err := p.egressCA()
	if err != nil {
		return nil, err
	}
	if err := dirs.WriteFile(CAFile, ca.CertPEM(), 0o644); err != nil {
		return nil, fmt.Errorf("egress ca certificate: %w", err)
	}
	return ca, nil
}

// egressOn says whether sandboxes get an egress proxy: an allowlist, a
// thread cap (every sandbox then has one), or a policy with credentials,
// host rules or egress_default ask.
func (p *Proxies) egressOn() bool {
	pol, cfg := p.cfg.Policy, &p.cfg
	return len(cfg.Egress) > 0 || len(cfg.EgressThreadMax) > 0 || len(pol.Credentials()) > 0 || pol.EgressDefault() == policy.Ask || pol.HasHostRules()
}

// PlaceCA puts the egress CA certificate in a sandbox's bridge folder
// when the agent is told to trust it (it reads the file at start): a
// pooled sandbox gets it before its egress proxy serves, at its claim. The
// certificate is public.
func (p *Proxies) PlaceCA(dirs boxdir.Dirs) error {
	if len(p.approvalEnv()) == 0 {
		return nil
	}
	_, err := p.placeCA(dirs)
	return err
}

// approvalEnv tells the agent where the CA certificate is, when the proxy
// may terminate TLS.
func (p *Proxies) approvalEnv() []string {
	if len(p.cfg.Policy.Credentials()) == 0 {
		return nil
	}
	return []string{"BOXWIRE_CA_CERT=" + sandbox.SocketMount + "/" + CAFile}
}

// Env is the sandbox environment for the proxies: the egress
// socket when egress is configured, and the CA. It holds no secret: the
// LLM token is handed to the agent in its claim.
func (p *Proxies) Env() []string {
	var env []string
	if p.egressOn() {
		env = append(env, "BOXWIRE_EGRESS_SOCKET="+sandbox.SocketMount+"/"+EgressSocket)
	}
	return append(env, p.approvalEnv()...)
}

// egressApprovals adds Config.Check, the policy's credentials and the CA
// to the egress proxy of the sandbox of dirs, and puts the CA certificate
// in its bridge folder.
func (p *Proxies) egressApprovals(cfg *egress.Config, dirs boxdir.Dirs) error {
	id := dirs.ID()
	pol := p.cfg.Policy
	check := p.cfg.Check
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
	cfg.CA, cfg.UpstreamRoots = ca, p.cfg.EgressRoots
	cfg.Credentials = func(t egress.Target) (egress.Credential, bool) {
		c, ok := pol.CredentialFor(t.Host, t.Port)
		return egress.Credential{Name: c.Name, Header: c.Header, Value: c.Value}, ok
	}
	return nil
}

// ServeEgress serves the egress proxy in dirs when egress is configured;
// it returns nil, nil when it is not. The proxy decides with the bridge's
// allowlist and policy and the sandbox's own thread rules, looked up at
// each request.
func (p *Proxies) ServeEgress(dirs boxdir.Dirs, log *slog.Logger) (*egress.Listener, error) {
	if !p.egressOn() {
		return nil, nil
	}
	rules, err := egress.ParseRules(p.cfg.Egress)
	if err != nil {
		return nil, err
	}
	id := dirs.ID()
	ecfg := egress.Config{Rules: rules, Logger: log.With("component", "egress"),
		OnDecision: func(d egress.Decision) {
			if p.cfg.Decided != nil {
				p.cfg.Decided(d)
			}
			p.cfg.Publish(id, wire.MustNew(wire.TypeEgress, "", "", wire.EgressDecision{
				Method: d.Method, Host: d.Host, Port: d.Port, Allowed: d.Allowed, Rule: d.Rule, Reason: d.Reason,
			}))
		}}
	if err := p.egressApprovals(&ecfg, dirs); err != nil {
		return nil, err
	}
	ecfg.Check = p.withThreadRules(id, ecfg.Check)
	ln, err := dirs.Listen(EgressSocket)
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
