package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Per-thread egress rules (docs/egress-thread.md). A thread may ask for
// egress rules when it is created (wire.CreateThread.Egress); they add to
// the bridge's allowlist for its sandbox alone, and each must fall within
// Config.EgressThreadMax. The rules belong to the sandbox (Box.egress): in
// assistant scope the first thread fixes them and a later thread may ask
// for the same rules or none; SetEgress replaces them later. They are kept
// in the thread's record, so an adopted or replaced sandbox keeps them.

const (
	// egressSocket is the egress proxy's socket name in a sandbox's folder.
	egressSocket = "egress.sock"
	// caFile is the egress CA certificate's name in each socket folder;
	// the agent points the usual TLS trust variables at it (agent/trust).
	caFile = "ca.pem"
	// maxThreadEgressRules bounds the rules one thread may ask for.
	maxThreadEgressRules = 64
)

// ThreadEgress validates rules a thread asks for and returns them in
// canonical form, sorted and without duplicates (nil when it asks for
// none): a rule that does not parse is a bad_message, one outside the
// bridge's thread cap (or any, when the bridge has none) is not_allowed.
func (f *Fleet) ThreadEgress(asked []string) ([]string, error) {
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
	if len(f.cfg.EgressThreadMax) == 0 {
		return nil, wire.Error{Code: wire.CodeNotAllowed,
			Message: "egress: this bridge does not let threads ask for egress rules (its operator sets BOXWIRE_EGRESS_THREAD_MAX)"}
	}
	max, _ := egress.ParseRules(f.cfg.EgressThreadMax) // checked by New
	for _, r := range rules {
		if !max.Covers(r) {
			return nil, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
				"egress: rule %q is outside what this bridge lets a thread ask for (%s)", r.Text, strings.Join(f.cfg.EgressThreadMax, ", "))}
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
func (f *Fleet) joinEgress(b *Box, want []string) error {
	f.mu.Lock()
	have := b.egress
	f.mu.Unlock()
	if len(want) == 0 || slices.Equal(want, have) {
		return nil
	}
	return wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
		"egress: the sandbox of assistant %q has egress rules [%s], fixed by its first thread; a thread may join it asking for those or none, not [%s]",
		b.assistant, strings.Join(have, " "), strings.Join(want, " "))}
}

// setBoxEgress gives b the thread rules (a pooled sandbox at claim).
func (f *Fleet) setBoxEgress(b *Box, rules []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b.egress = rules
}

// egressRulesOf returns the parsed thread rules of the sandbox whose box
// id is id (none when it has none or is gone).
func (f *Fleet) egressRulesOf(id string) egress.Rules {
	f.mu.Lock()
	var texts []string
	for _, b := range f.boxes {
		if b.id == id {
			texts = b.egress
			break
		}
	}
	f.mu.Unlock()
	rules, _ := egress.ParseRules(texts) // canonical texts of parsed rules
	return rules
}

// withThreadRules wraps the egress decision of sandbox id so that its
// thread rules allow a target as the bridge's allowlist does (the policy's
// host rules still come first, see Config.Check); a refusal nothing decided
// says when the sandbox has no rules at all.
func (f *Fleet) withThreadRules(id string, check func(context.Context, egress.Request) egress.Verdict) func(context.Context, egress.Request) egress.Verdict {
	return func(ctx context.Context, req egress.Request) egress.Verdict {
		var own egress.Rules
		if req.Kind == egress.KindEgress {
			own = f.egressRulesOf(id)
			if r, ok := own.Match(req.Target); ok && req.AllowedBy == "" {
				req.AllowedBy = r.Text
			}
		}
		v := check(ctx, req)
		if !v.Allowed && v.Rule == "" && req.Kind == egress.KindEgress && len(own) == 0 && len(f.cfg.Egress) == 0 {
			v.Reason += " (this sandbox has no egress rules; a thread asks for them when it is created or with PATCH /v1/threads/{id})"
		}
		return v
	}
}

// adoptEgress gives an adopted sandbox the thread rules its stored
// threads name, dropping any the bridge's thread cap no longer covers, and
// sets them in recs, so the records registered again say what holds now.
func (f *Fleet) adoptEgress(b *Box, recs []ThreadRecord, log *slog.Logger) {
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
	max, _ := egress.ParseRules(f.cfg.EgressThreadMax)
	kept := rules[:0:0]
	for _, r := range rules {
		if max.Covers(r) {
			kept = append(kept, r)
		} else {
			log.Warn("stored egress rule is outside the bridge's thread cap now; dropped", "rule", r.Text)
		}
	}
	now := canonical(kept)
	f.setBoxEgress(b, now)
	for i := range recs {
		recs[i].Egress = now
	}
}

// SetEgress gives box id, when it is live, the canonical rules (nil:
// none) and stores them in the records of every thread of that box, under
// the box's lock. It returns the rules the box had (the live box's, else
// prev, the caller's record's) and the threads of the box, live or stored,
// sorted.
func (f *Fleet) SetEgress(ctx context.Context, boxID string, rules, prev []string) (had, ids []string, err error) {
	unlockBox := f.LockBox(boxID)
	defer unlockBox()
	f.mu.Lock()
	for _, b := range f.boxes {
		if b.id == boxID && !b.gone {
			prev, b.egress = b.egress, rules
			for tid := range b.members {
				ids = append(ids, tid)
			}
		}
	}
	f.mu.Unlock()
	recs, err := f.cfg.Records.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list stored threads: %w", err)
	}
	for _, r := range recs {
		if r.Box != boxID {
			continue
		}
		r.Egress = rules
		if err := f.cfg.Records.Put(ctx, r); err != nil {
			return nil, nil, fmt.Errorf("store thread %s: %w", r.ID, err)
		}
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return slices.Clone(prev), ids, nil
}

// caCache loads the egress CA once, from <DataDir>/ca.
type caCache struct {
	once sync.Once
	ca   *egress.CA
	err  error
}

// egressCA returns the bridge's egress CA, creating it on first use.
func (f *Fleet) egressCA() (*egress.CA, error) {
	f.ca.once.Do(func() {
		f.ca.ca, f.ca.err = egress.LoadOrCreateCA(filepath.Join(f.cfg.DataDir, "ca"))
	})
	return f.ca.ca, f.ca.err
}

// placeCA writes the bridge's egress CA certificate into a sandbox's
// bridge folder, where the agent reads it at start, and returns the CA.
func (f *Fleet) placeCA(dirs boxdir.Dirs) (*egress.CA, error) {
	ca, err := f.egressCA()
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
func (f *Fleet) egressOn() bool {
	p := f.cfg.Policy
	return len(f.cfg.Egress) > 0 || len(f.cfg.EgressThreadMax) > 0 || len(p.Credentials()) > 0 || p.EgressDefault() == policy.Ask || p.HasHostRules()
}

// approvalEnv tells the agent where the CA certificate is, when the proxy
// may terminate TLS.
func (f *Fleet) approvalEnv() []string {
	if len(f.cfg.Policy.Credentials()) == 0 {
		return nil
	}
	return []string{"BOXWIRE_CA_CERT=" + sandbox.SocketMount + "/" + caFile}
}

// securityEnv is the sandbox environment for the proxies: the egress
// socket when egress is configured, and the CA. It holds no secret: the
// LLM token is handed to the agent in its claim.
func (f *Fleet) securityEnv() []string {
	var env []string
	if f.egressOn() {
		env = append(env, "BOXWIRE_EGRESS_SOCKET="+sandbox.SocketMount+"/"+egressSocket)
	}
	return append(env, f.approvalEnv()...)
}

// egressApprovals adds Config.Check, the policy's credentials and the CA
// to the egress proxy of the sandbox of dirs, and puts the CA certificate
// in its bridge folder.
func (f *Fleet) egressApprovals(cfg *egress.Config, dirs boxdir.Dirs) error {
	id := dirs.ID()
	pol := f.cfg.Policy
	check := f.cfg.Check
	if check == nil {
		check = allowlisted
	}
	cfg.Check = func(ctx context.Context, req egress.Request) egress.Verdict {
		return check(ctx, id, req)
	}
	if len(pol.Credentials()) == 0 {
		return nil
	}
	ca, err := f.placeCA(dirs)
	if err != nil {
		return err
	}
	cfg.CA, cfg.UpstreamRoots = ca, f.cfg.EgressRoots
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
func (f *Fleet) serveEgress(dirs boxdir.Dirs, log *slog.Logger) (*egress.Listener, error) {
	if !f.egressOn() {
		return nil, nil
	}
	rules, err := egress.ParseRules(f.cfg.Egress)
	if err != nil {
		return nil, err
	}
	id := dirs.ID()
	ecfg := egress.Config{Rules: rules, Logger: log.With("component", "egress"),
		OnDecision: func(d egress.Decision) {
			f.publish(id, wire.MustNew(wire.TypeEgress, "", "", wire.EgressDecision{
				Method: d.Method, Host: d.Host, Port: d.Port, Allowed: d.Allowed, Rule: d.Rule, Reason: d.Reason,
			}))
		}}
	if err := f.egressApprovals(&ecfg, dirs); err != nil {
		return nil, err
	}
	ecfg.Check = f.withThreadRules(id, ecfg.Check)
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
