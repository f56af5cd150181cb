package egress

import (
	"context"
	"fmt"
	"net/http"
)

// Kinds of Request.
const (
	// KindEgress asks whether a connection or plain request may go out.
	KindEgress = "egress"
	// KindCredential asks whether one request may go out with a host-held
	// credential added.
	KindCredential = "credential"
)

// Request is what Config.Check is asked about.
type Request struct {
	// Kind is KindEgress or KindCredential.
	Kind   string
	Method string
	Target Target
	// URL is the request's URL when the proxy sees it (plain HTTP, or
	// HTTPS it terminates); empty for a CONNECT.
	URL string
	// AllowedBy is the allowlist rule that matches Target, if any.
	AllowedBy string
	// Credential is the name of the credential (KindCredential), or of
	// the credential configured for Target (KindEgress), if any.
	Credential string
}

// Verdict answers a Request.
type Verdict struct {
	Allowed bool
	// Rule says what decided; Reason why (shown in a refusal).
	Rule, Reason string
}

// Credential is a header the proxy adds to every request to a host, so
// the sandbox never holds the secret. For HTTPS the proxy terminates TLS
// with Config.CA to add it.
type Credential struct {
	Name   string
	Header string
	Value  string
}

// decide applies the allowlist and Config.Check to a request for t. It
// may block while Check waits for a person (until r's context ends).
func (p *Proxy) decide(r *http.Request, t Target) Verdict {
	rule, listed := p.cfg.Rules.Match(t)
	if p.cfg.Check == nil {
		if listed {
			return Verdict{Allowed: true, Rule: rule.Text}
		}
		return Verdict{Reason: fmt.Sprintf("no egress rule allows %s", t)}
	}
	req := Request{Kind: KindEgress, Method: r.Method, Target: t}
	if r.Method != http.MethodConnect {
		req.URL = r.URL.String()
	}
	if listed {
		req.AllowedBy = rule.Text
	}
	if c, ok := p.credential(t); ok {
		req.Credential = c.Name
	}
	return p.cfg.Check(r.Context(), req)
}

// credential returns the credential configured for t, if any.
func (p *Proxy) credential(t Target) (Credential, bool) {
	if p.cfg.Credentials == nil {
		return Credential{}, false
	}
	return p.cfg.Credentials(t)
}

// addCredential sets t's credential on out, after asking Config.Check
// about this use; it reports why not when the use is refused. Requests
// to hosts without a credential pass unchanged.
func (p *Proxy) addCredential(ctx context.Context, out *http.Request, t Target) (ok bool, reason string) {
	c, has := p.credential(t)
	if !has {
		return true, ""
	}
	if p.cfg.Check != nil {
		v := p.cfg.Check(ctx, Request{Kind: KindCredential, Method: out.Method, Target: t,
			URL: out.URL.String(), Credential: c.Name})
		p.log.Info("egress credential", "credential", c.Name, "host", t.Host, "method", out.Method,
			"url", out.URL.String(), "allowed", v.Allowed, "rule", v.Rule, "reason", v.Reason)
		if !v.Allowed {
			return false, v.Reason
		}
	}
	out.Header.Set(c.Header, c.Value)
	return true, ""
}
