package preview

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Browser access to the host form. The bridge's session cookie belongs to
// the bridge's host and never reaches a preview host, so a logged-in page
// opens GET /v1/threads/{id}/open/{port} on the bridge (guarded as every
// thread route): it mints a one-time ticket bound to the thread, the port
// and the credentials the request came with, and redirects to the preview
// host's /.boxwire/ticket, which trades the ticket for a preview cookie
// of that host alone. Every request with the preview cookie is checked
// again with the bound credentials (guard): a logout, an expired session
// or a revoked key ends the preview at once.
const (
	// previewCookie names the preview host's cookie; like every boxwire…
	// cookie it is kept from the app, and the app cannot set it.
	previewCookie = "boxwire_preview"
	// ticketPath is where a preview host redeems a ticket.
	ticketPath = "/.boxwire/ticket"
	// ticketTTL bounds a ticket's life; sessionTTL a preview cookie's.
	ticketTTL  = time.Minute
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the tickets and preview sessions held.
	maxSessions = 10000
)

// grant is a ticket's or a preview session's: a thread's port, and the
// credentials to check again (an Authorization or a Cookie header).
type grant struct {
	thread  string
	port    int
	header  string // "Authorization" or "Cookie"
	value   string
	expires time.Time
}

// grants holds tickets and preview sessions by their random token.
type grants struct {
	mu      sync.Mutex
	tickets map[string]grant
	live    map[string]grant
}

func newGrants() *grants {
	return &grants{tickets: map[string]grant{}, live: map[string]grant{}}
}

// add keeps g under a new token in m, dropping expired entries first.
func (gs *grants) add(m map[string]grant, g grant) (string, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := time.Now()
	for k, old := range m {
		if now.After(old.expires) {
			delete(m, k)
		}
	}
	if len(m) >= maxSessions {
		return "", false
	}
	token := newToken()
	m[token] = g
	return token, true
}

// redeem takes a ticket once.
func (gs *grants) redeem(token string) (grant, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.tickets[token]
	delete(gs.tickets, token)
	return g, ok && time.Now().Before(g.expires)
}

// session looks a preview session up.
func (gs *grants) session(token string) (grant, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.live[token]
	return g, ok && time.Now().Before(g.expires)
}

// serveOpen answers GET /v1/threads/{id}/open/{port}: a ticket for the
// caller's credentials, and a redirect to the host form that redeems it.
func (p *Preview) serveOpen(w http.ResponseWriter, r *http.Request) {
	port, ok := pathPort(w, r)
	if !ok {
		return
	}
	if p.domain == "" {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "this bridge has no preview domain (--preview-domain): use the path form")
		return
	}
	g := grant{thread: r.PathValue("id"), port: port, header: "Authorization", value: r.Header.Get("Authorization"), expires: time.Now().Add(ticketTTL)}
	if g.value == "" {
		g.header, g.value = "Cookie", r.Header.Get("Cookie")
	}
	ticket, ok := p.grants.add(p.grants.tickets, g)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, wire.CodeInternal, "too many preview sessions")
		return
	}
	next := r.URL.Query().Get("path")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	target := strings.TrimSuffix(p.hostURL(r, strconv.Itoa(port)+"-"+g.thread), "/") + ticketPath + "?t=" + ticket + "&next=" + url.QueryEscape(next)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// serveTicket redeems a ticket on the preview host it was made for.
func (p *Preview) serveTicket(w http.ResponseWriter, r *http.Request, thread string, port int) {
	g, ok := p.grants.redeem(r.URL.Query().Get("t"))
	if !ok || g.thread != thread || g.port != port {
		writeError(w, http.StatusForbidden, wire.CodeUnauthorized, "no such ticket for this preview (used, expired, or for another): open the preview from the bridge again")
		return
	}
	g.expires = time.Now().Add(sessionTTL)
	sid, ok := p.grants.add(p.grants.live, g)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, wire.CodeInternal, "too many preview sessions")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: previewCookie, Value: sid, Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteLaxMode, MaxAge: int(sessionTTL / time.Second)})
	next := r.URL.Query().Get("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sessionAllows checks a preview cookie on a host-form request: it must be
// this host's, and its bound credentials must still pass guard. When they
// do not, it answers the request (as guard did) and reports false.
func (p *Preview) sessionAllows(w http.ResponseWriter, r *http.Request, c *http.Cookie, thread string, port int, guard func(http.Handler) http.Handler) bool {
	g, ok := p.grants.session(c.Value)
	if !ok || g.thread != thread || g.port != port {
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "this preview session has ended: open the preview from the bridge again")
		return false
	}
	probe, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/threads/"+thread+"/open/"+strconv.Itoa(port), nil)
	if err != nil {
		return false
	}
	probe.RemoteAddr, probe.Host = r.RemoteAddr, r.Host
	probe.Header.Set(g.header, g.value)
	probe.SetPathValue("id", thread)
	probe.SetPathValue("port", strconv.Itoa(port))
	passed := false
	guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed = true })).ServeHTTP(&discard{}, probe)
	if !passed {
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "the credentials this preview was opened with no longer reach the thread: open it from the bridge again")
	}
	return passed
}

// discard is a ResponseWriter that keeps nothing: the guard's answer to a
// probe is not sent; sessionAllows answers for it.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
