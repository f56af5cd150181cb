package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

const (
	// dialTimeout bounds resolving and connecting to a target.
	dialTimeout = 10 * time.Second
	// readHeaderTimeout bounds a sandbox's request headers.
	readHeaderTimeout = 10 * time.Second
)

// Config configures a Proxy. The zero value refuses everything.
type Config struct {
	// Rules is the allowlist.
	Rules Rules
	// AllowPrivate lets allowed names resolve to loopback, private,
	// link-local and unspecified addresses. Off by default: only rules
	// written as IP literals reach such addresses.
	AllowPrivate bool
	// Resolver looks names up; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// Logger receives one line per decision; nil discards them.
	Logger *slog.Logger
	// OnDecision, when set, is called for every request with the
	// decision. It must not block.
	OnDecision func(Decision)

	// Approvals and host-held credentials (hold.go, intercept.go).
	//
	// Check, when set, makes every decision instead of the allowlist
	// alone (the request says which allowlist rule matched): it may hold
	// a request while a person is asked, and must return when the
	// context ends. It is also asked about each credential use.
	Check func(ctx context.Context, req Request) Verdict
	// Credentials returns the credential to add to requests to a target.
	// Plain HTTP requests get it added; CONNECTs to such a target are
	// terminated with CA (required for them) and their requests get it.
	Credentials func(Target) (Credential, bool)
	// CA signs the certificates the proxy presents when it terminates TLS.
	CA *CA
	// UpstreamRoots verifies the real hosts behind terminated TLS; nil
	// means the system's roots.
	UpstreamRoots *x509.CertPool
}

// Decision is one request's outcome.
type Decision struct {
	// Method is CONNECT or the HTTP method.
	Method string
	// Host and Port are the normalized target (Host is the raw target when
	// it could not be normalized).
	Host string
	Port int
	// Allowed, and the rule that allowed it or the reason it was refused.
	Allowed bool
	Rule    string
	Reason  string
	// Invalid says the request named no target the proxy serves (a
	// CONNECT not to host:port, a URL that is not absolute http://, a
	// name that does not normalize): refused before any rule was asked.
	Invalid bool
}

// Proxy is an http.Handler serving CONNECT and absolute-URI HTTP requests
// for the allowed targets. It is safe for concurrent use. A CONNECT
// request blocks until either side of the tunnel closes or the Listener
// serving it closes.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	transport *http.Transport

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
	upTLS   *http.Transport // made on first use (intercept.go)
	wg      sync.WaitGroup  // tunnel copy goroutines
}

// New returns a proxy for cfg. It starts nothing.
func New(cfg Config) *Proxy {
	p := &Proxy{cfg: cfg, log: cfg.Logger, tunnels: map[net.Conn]struct{}{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.cfg.Resolver == nil {
		p.cfg.Resolver = net.DefaultResolver
	}
	p.transport = &http.Transport{
		Proxy:                 nil, // never chain to the bridge's own proxy settings
		DialContext:           p.dialAddr,
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	return p
}

// ServeHTTP decides and serves one proxy request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := p.target(r)
	d := Decision{Method: r.Method, Host: r.Host, Port: t.Port, Invalid: err != nil}
	if err == nil {
		d.Host = t.Host
		if v := p.decide(r, t); v.Allowed { // hold.go: allowlist, then Config.Check
			d.Allowed, d.Rule = true, v.Rule
		} else {
			d.Rule, err = v.Rule, errors.New(v.Reason)
		}
	}
	if err != nil {
		d.Reason = err.Error()
		p.decided(d)
		http.Error(w, "boxwire egress: refused: "+d.Reason, http.StatusForbidden)
		return
	}
	p.decided(d)
	if _, cred := p.credential(t); cred && r.Method == http.MethodConnect && p.cfg.CA != nil {
		p.intercept(w, r, t) // intercept.go: terminate TLS to add the credential
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, t)
		return
	}
	p.forward(w, r, t)
}

// target normalizes the request's destination or says why it cannot.
func (p *Proxy) target(r *http.Request) (Target, error) {
	if r.Method == http.MethodConnect {
		if r.URL.Host == "" || r.URL.Host != r.RequestURI {
			return Target{}, fmt.Errorf("CONNECT target %q is not host:port", r.RequestURI)
		}
		return Normalize(r.RequestURI, 0)
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		return Target{}, fmt.Errorf("only absolute http:// URLs are proxied (use CONNECT for https), not %q", r.RequestURI)
	}
	if r.URL.User != nil {
		return Target{}, errors.New("URLs with user info are refused")
	}
	if r.URL.Opaque != "" {
		return Target{}, fmt.Errorf("URL %q is not a network URL", r.RequestURI)
	}
	return Normalize(r.URL.Host, 80)
}

func (p *Proxy) decided(d Decision) {
	p.log.Info("egress", "method", d.Method, "host", d.Host, "port", d.Port,
		"allowed", d.Allowed, "rule", d.Rule, "reason", d.Reason)
	if p.cfg.OnDecision != nil {
		p.cfg.OnDecision(d)
	}
}

// dialAddr dials a normalized "host:port" (the transport's dial).
func (p *Proxy) dialAddr(ctx context.Context, _, addr string) (net.Conn, error) {
	t, err := Normalize(addr, 0)
	if err != nil {
		return nil, err
	}
	return p.dial(ctx, t)
}

// dial connects to t: an IP literal directly (a rule named it), a name
// through the resolver, refusing non-public addresses unless allowed.
func (p *Proxy) dial(ctx context.Context, t Target) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	if t.IP.IsValid() {
		return d.DialContext(ctx, "tcp", netip.AddrPortFrom(t.IP, uint16(t.Port)).String())
	}
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", t.Host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", t.Host, err)
	}
	var lastErr error = fmt.Errorf("%s has no address", t.Host)
	for _, a := range addrs {
		a = a.Unmap()
		if !p.cfg.AllowPrivate && !public(a) {
			lastErr = fmt.Errorf("%s resolves to %s, which is not a public address", t.Host, a)
			continue
		}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(t.Port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// forward proxies one plain HTTP request to t and streams the answer.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t Target) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Host = t.String()
	out.Host = t.String()
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	if ok, reason := p.addCredential(r.Context(), out, t); !ok { // hold.go
		http.Error(w, "boxwire egress: refused: "+reason, http.StatusForbidden)
		return
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.log.Warn("egress upstream failed", "host", t.Host, "err", err)
		http.Error(w, "boxwire egress: upstream failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		switch k {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Proxy-Authenticate":
		default:
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
