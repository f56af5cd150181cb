package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Backend reaches threads' sandboxes: the server implements it over each
// thread's agent link.
type Backend interface {
	// DialPort opens a stream to port on the loopback of thread's sandbox.
	// Its errors are wire.Errors: CodeNotFound (no such thread),
	// CodeSandboxUnavailable (no running sandbox), CodePortClosed (nothing
	// listens), CodeStreamLimit.
	DialPort(ctx context.Context, thread string, port int) (net.Conn, error)
	// Ports lists what listens in thread's sandbox.
	Ports(ctx context.Context, thread string) ([]wire.Port, error)
}

// Config configures a Preview. Backend is required.
type Config struct {
	Backend Backend
	// Domain, when set, turns on the host form: {port}-{thread}.{Domain}
	// and pub-{token}.{Domain}. Its names must resolve to the bridge (a
	// wildcard record); use a registrable domain of its own, apart from
	// the bridge's, so apps cannot set cookies for the bridge.
	Domain string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Preview serves preview URLs, public links and forwards. It is safe for
// concurrent use.
type Preview struct {
	cfg       Config
	log       *slog.Logger
	domain    string // lower case, no dots around
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	links     *links
	grants    *grants // browser sessions of the host form (session.go)
}

// Limits of the proxy's connections to sandbox ports.
const (
	// idleConnTimeout closes a kept-alive connection to an app that
	// carried nothing this long.
	idleConnTimeout = 90 * time.Second
	// maxIdlePerPort bounds kept-alive connections per thread and port.
	maxIdlePerPort = 16
	// responseHeaderTimeout bounds waiting for an app's response headers.
	responseHeaderTimeout = 5 * time.Minute
	// upstreamSuffix ends the made-up host of an upstream URL, which only
	// names the thread and port for the Transport's pool and dialer.
	upstreamSuffix = ".sandbox.boxwire.invalid"
)

// New returns a Preview for cfg.
func New(cfg Config) (*Preview, error) {
	if cfg.Backend == nil {
		return nil, errors.New("preview: a backend is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Preview{cfg: cfg, log: cfg.Logger, domain: strings.Trim(strings.ToLower(cfg.Domain), "."), links: newLinks(), grants: newGrants()}
	p.transport = &http.Transport{
		Proxy:                 nil, // never a proxy from the environment: nothing leaves the streams
		DialContext:           p.dialUpstream,
		ForceAttemptHTTP2:     false,
		MaxIdleConnsPerHost:   maxIdlePerPort,
		IdleConnTimeout:       idleConnTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    p.transport,
		ErrorHandler: p.upstreamError,
		ModifyResponse: func(resp *http.Response) error {
			keepOwnCookies(resp.Header)
			return nil
		},
		ErrorLog:   slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BufferPool: copyBuffers{},
	}
	return p, nil
}

// copyBuffers are the proxy's copy buffers, each a stream's largest data
// frame (wire.LargeStreamData), so that one read of the stream can take a
// whole frame and one write pass it on (the proxy's own are 32 KiB).
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([wire.LargeStreamData]byte) }}

func (copyBuffers) Get() []byte  { return copyBufferPool.Get().(*[wire.LargeStreamData]byte)[:] }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put((*[wire.LargeStreamData]byte)(b)) }

// Close drops the kept-alive connections to apps; live requests go on.
func (p *Preview) Close() { p.transport.CloseIdleConnections() }

// Routes mounts the preview's routes on mux behind guard, the server's
// authentication and ownership check of the thread named {id}:
// GET /v1/threads/{id}/ports, the path form, the public link routes and
// GET /v1/threads/{id}/forward/{port}; and the public links' path form,
// which needs no credentials.
func (p *Preview) Routes(mux *http.ServeMux, guard func(http.Handler) http.Handler) {
	mux.Handle("GET /v1/threads/{id}/ports", guard(http.HandlerFunc(p.listPorts)))
	mux.Handle("/v1/threads/{id}/ports/{port}", guard(http.HandlerFunc(p.servePathRoot)))
	mux.Handle("/v1/threads/{id}/ports/{port}/{rest...}", guard(http.HandlerFunc(p.servePath)))
	mux.Handle("POST /v1/threads/{id}/public", guard(http.HandlerFunc(p.postPublic)))
	mux.Handle("DELETE /v1/threads/{id}/public/{port}", guard(http.HandlerFunc(p.deletePublic)))
	mux.Handle("GET /v1/threads/{id}/forward/{port}", guard(http.HandlerFunc(p.serveForward)))
	mux.Handle("GET /v1/threads/{id}/open/{port}", guard(http.HandlerFunc(p.serveOpen))) // session.go
	mux.HandleFunc("/v1/public/{token}/{rest...}", p.servePublicPath)
	mux.HandleFunc("/v1/public/{token}", p.servePublicPath)
}

// Hosts answers requests whose Host is a preview host under Config.Domain
// (with guard for the thread form, as Routes) and passes every other
// request to next. Without a Domain it returns next.
func (p *Preview) Hosts(next http.Handler, guard func(http.Handler) http.Handler) http.Handler {
	if p.domain == "" {
		return next
	}
	thread := guard(http.HandlerFunc(p.serveHost))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		label, ok := p.previewLabel(r.Host)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if token, ok := strings.CutPrefix(label, publicPrefix); ok {
			p.servePublic(w, r, token, r.URL.Path, "")
			return
		}
		port, id, ok := parseThreadLabel(label)
		if !ok {
			writeError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("%q is not a preview host: {port}-{thread}.%s or %s{token}.%s", label, p.domain, publicPrefix, p.domain))
			return
		}
		r.SetPathValue("id", id)
		r.SetPathValue("port", strconv.Itoa(port))
		if r.URL.Path == ticketPath { // session.go
			p.serveTicket(w, r, id, port)
			return
		}
		if c, err := r.Cookie(previewCookie); err == nil && r.Header.Get("Authorization") == "" {
			if p.sessionAllows(w, r, c, id, port, guard) {
				p.serveHost(w, r)
			}
			return
		}
		thread.ServeHTTP(w, r)
	})
}

// previewLabel returns the first label of host when host is one name
// below the preview domain.
func (p *Preview) previewLabel(hostport string) (string, bool) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+p.domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", false
	}
	return label, true
}

// parseThreadLabel splits "{port}-{thread}".
func parseThreadLabel(label string) (int, string, bool) {
	ps, id, ok := strings.Cut(label, "-")
	if !ok || id == "" {
		return 0, "", false
	}
	port, err := parsePort(ps)
	return port, id, err == nil
}

// parsePort reads a port 1 to 65535.
func parsePort(s string) (int, error) {
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != s {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return port, nil
}

// pathPort reads the {port} of a request, answering 400 when it is not one.
func pathPort(w http.ResponseWriter, r *http.Request) (int, bool) {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, err.Error())
		return 0, false
	}
	return port, true
}

// servePathRoot redirects /v1/threads/{id}/ports/{port} to the folder
// form, so the app's relative links resolve under it.
func (p *Preview) servePathRoot(w http.ResponseWriter, r *http.Request) {
	if _, ok := pathPort(w, r); !ok {
		return
	}
	u := *r.URL
	u.Path += "/"
	u.RawPath = ""
	http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
}

// servePath is the path form.
func (p *Preview) servePath(w http.ResponseWriter, r *http.Request) {
	port, ok := pathPort(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	prefix := "/v1/threads/" + id + "/ports/" + strconv.Itoa(port)
	w.Header().Set("Content-Security-Policy", sandboxCSP)
	p.forward(w, r, id, port, "/"+r.PathValue("rest"), prefix)
}

// serveHost is the host form of a thread's port (Hosts set the path values).
func (p *Preview) serveHost(w http.ResponseWriter, r *http.Request) {
	port, ok := pathPort(w, r)
	if !ok {
		return
	}
	p.forward(w, r, r.PathValue("id"), port, r.URL.Path, "")
}

// sandboxCSP puts the path form's pages in an opaque origin: they are the
// sandbox's, served on the bridge's own origin, and must not use its
// session (its cookie, its CSRF token) from script.
const sandboxCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// target is where forward sends a request, for rewrite.
type target struct {
	thread, path, prefix string
	port                 int
}

type targetKey struct{}

// forward proxies r to port of thread's sandbox with path as its path;
// prefix is where the app is mounted on the bridge ("" for a host).
func (p *Preview) forward(w http.ResponseWriter, r *http.Request, thread string, port int, path, prefix string) {
	ctx := context.WithValue(r.Context(), targetKey{}, target{thread: thread, port: port, path: path, prefix: prefix})
	p.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite is the proxy's Rewrite: the upstream request goes to the port
// of the sandbox forward chose, addressed as the app would be inside the
// sandbox, without the bridge's credentials.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(target)
	pr.Out.URL = &url.URL{Scheme: "http", Host: upstreamHost(t.thread, t.port), Path: t.path, RawQuery: pr.In.URL.RawQuery}
	pr.Out.Host = "localhost:" + strconv.Itoa(t.port)
	stripCredentials(pr.Out.Header)
	pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	pr.Out.Header.Set("X-Forwarded-Proto", scheme(pr.In))
	if t.prefix != "" {
		pr.Out.Header.Set("X-Forwarded-Prefix", t.prefix)
	}
}

// stripCredentials removes what authenticated the request to the bridge:
// the app must never see the owner's key, token or cookies.
func stripCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del("X-Boxwire-Csrf")
	cookies := h.Values("Cookie")
	h.Del("Cookie")
	var kept []string
	for _, line := range cookies {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != "" && !strings.HasPrefix(strings.ToLower(name), "boxwire") {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// keepOwnCookies drops the app's Set-Cookie lines that would set one of
// the bridge's cookies (named boxwire…): the path form is the bridge's own
// origin, and an app must not replace or clear its session.
func keepOwnCookies(h http.Header) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range lines {
		name, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), "boxwire") {
			h.Add("Set-Cookie", line)
		}
	}
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// upstreamHost names thread and port in an upstream URL; dialUpstream
// reads them back.
func upstreamHost(thread string, port int) string {
	return strconv.Itoa(port) + "." + url.PathEscape(thread) + upstreamSuffix
}

// dialUpstream is the Transport's only dialer: a stream to the port of
// the sandbox the made-up host names, never a connection on the host.
func (p *Preview) dialUpstream(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("preview upstream %q: %w", addr, err)
	}
	name, ok := strings.CutSuffix(host, upstreamSuffix)
	ps, thread, ok2 := strings.Cut(name, ".")
	if !ok || !ok2 {
		return nil, fmt.Errorf("preview upstream %q is not a sandbox port", addr)
	}
	port, err := parsePort(ps)
	if err != nil {
		return nil, err
	}
	if thread, err = url.PathUnescape(thread); err != nil {
		return nil, err
	}
	return p.cfg.Backend.DialPort(ctx, thread, port)
}

// upstreamError answers a request the app could not be reached for.
func (p *Preview) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := http.StatusBadGateway, wire.CodeSandboxUnavailable
	var we wire.Error
	switch {
	case errors.As(err, &we):
		code = we.Code
		switch we.Code {
		case wire.CodeStreamLimit, wire.CodeSandboxUnavailable:
			status = http.StatusServiceUnavailable
		case wire.CodeNotFound:
			status = http.StatusNotFound
		}
		err = errors.New(we.Message)
	case errors.Is(err, context.Canceled):
		return // the client went away
	}
	p.log.Debug("preview upstream failed", "path", r.URL.Path, "err", err)
	writeError(w, status, code, err.Error())
}

// writeError answers with the bridge's JSON error body.
func writeError(w http.ResponseWriter, status int, code wire.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error wire.Error `json:"error"`
	}{wire.Error{Code: code, Message: msg}})
}
