package preview

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	// publicPrefix starts a public link's host label.
	publicPrefix = "pub-"
	// maxLinksPerThread bounds a thread's public links.
	maxLinksPerThread = 16
)

// link is one public link: a thread's port.
type link struct {
	thread string
	port   int
}

// links are the public links, in memory: a bridge restart revokes them.
type links struct {
	mu      sync.Mutex
	byToken map[string]link
	byPort  map[link]string
}

func newLinks() *links {
	return &links{byToken: map[string]link{}, byPort: map[link]string{}}
}

// newToken is 128 random bits in lower-case base32: unguessable, and fit
// for a host name's label.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// make returns thread's link to port, making one if there is none;
// created says it was made now.
func (ls *links) make(thread string, port int) (token string, created bool, err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := link{thread: thread, port: port}
	if t, ok := ls.byPort[k]; ok {
		return t, false, nil
	}
	n := 0
	for l := range ls.byPort {
		if l.thread == thread {
			n++
		}
	}
	if n >= maxLinksPerThread {
		return "", false, fmt.Errorf("the thread already has its maximum of %d public links", maxLinksPerThread)
	}
	token = newToken()
	ls.byToken[token], ls.byPort[k] = k, token
	return token, true, nil
}

// revoke removes thread's link to port and reports whether there was one.
func (ls *links) revoke(thread string, port int) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := link{thread: thread, port: port}
	t, ok := ls.byPort[k]
	if ok {
		delete(ls.byPort, k)
		delete(ls.byToken, t)
	}
	return ok
}

func (ls *links) lookup(token string) (link, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.byToken[token]
	return l, ok
}

func (ls *links) of(thread string, port int) string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byPort[link{thread: thread, port: port}]
}

// PortInfo is one entry of GET /v1/threads/{id}/ports: a listening port
// and where to reach it.
type PortInfo struct {
	wire.Port
	// URL is the path form; HostURL the host form (with a preview
	// domain); Public the public link's path form, and PublicHost its
	// host form, when the port has one.
	URL        string `json:"url"`
	HostURL    string `json:"host_url,omitempty"`
	Public     string `json:"public,omitempty"`
	PublicHost string `json:"public_host,omitempty"`
	// Open, with a preview domain, is the bridge route that opens the
	// host form in a browser logged in to the bridge (session.go).
	Open string `json:"open,omitempty"`
}

// Public is the answer of POST /v1/threads/{id}/public.
type Public struct {
	Port  int    `json:"port"`
	Token string `json:"token"`
	// URL is the link's path form; HostURL its host form (with a preview
	// domain).
	URL     string `json:"url"`
	HostURL string `json:"host_url,omitempty"`
}

// listPorts answers GET /v1/threads/{id}/ports.
func (p *Preview) listPorts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ports, err := p.cfg.Backend.Ports(r.Context(), id)
	if err != nil {
		p.upstreamError(w, r, err)
		return
	}
	out := struct {
		Ports []PortInfo `json:"ports"`
	}{Ports: []PortInfo{}}
	for _, port := range ports {
		info := PortInfo{Port: port, URL: fmt.Sprintf("/v1/threads/%s/ports/%d/", id, port.Port), HostURL: p.hostURL(r, fmt.Sprintf("%d-%s", port.Port, id))}
		if p.domain != "" {
			info.Open = fmt.Sprintf("/v1/threads/%s/open/%d", id, port.Port)
		}
		if token := p.links.of(id, port.Port); token != "" {
			info.Public, info.PublicHost = "/v1/public/"+token+"/", p.hostURL(r, publicPrefix+token)
		}
		out.Ports = append(out.Ports, info)
	}
	writeJSON(w, http.StatusOK, out)
}

// hostURL is the URL of a preview host label, with the scheme and port
// the request came on; "" without a preview domain.
func (p *Preview) hostURL(r *http.Request, label string) string {
	if p.domain == "" {
		return ""
	}
	host := label + "." + p.domain
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		host = net.JoinHostPort(host, port)
	}
	return scheme(r) + "://" + host + "/"
}

// postPublic answers POST /v1/threads/{id}/public {"port": N}: the port's
// public link, made when it has none (201) or the one it has (200).
func (p *Preview) postPublic(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Port int `json:"port"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, "the body must be {\"port\": N}: "+err.Error())
		return
	}
	if _, err := parsePort(strconv.Itoa(body.Port)); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadMessage, err.Error())
		return
	}
	id := r.PathValue("id")
	token, created, err := p.links.make(id, body.Port)
	if err != nil {
		writeError(w, http.StatusTooManyRequests, wire.CodeQuotaExceeded, err.Error())
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		p.log.Info("public link made", "thread", id, "port", body.Port)
	}
	writeJSON(w, status, Public{Port: body.Port, Token: token, URL: "/v1/public/" + token + "/", HostURL: p.hostURL(r, publicPrefix+token)})
}

// deletePublic answers DELETE /v1/threads/{id}/public/{port}: the link
// stops working at once (204), or there was none (404).
func (p *Preview) deletePublic(w http.ResponseWriter, r *http.Request) {
	port, ok := pathPort(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if !p.links.revoke(id, port) {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("port %d of thread %q has no public link", port, id))
		return
	}
	p.log.Info("public link revoked", "thread", id, "port", port)
	w.WriteHeader(http.StatusNoContent)
}

// servePublicPath is a public link's path form, /v1/public/{token}/….
func (p *Preview) servePublicPath(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if !strings.HasPrefix(r.URL.Path, "/v1/public/"+token+"/") {
		if _, ok := p.links.lookup(token); ok {
			u := *r.URL
			u.Path += "/"
			u.RawPath = ""
			http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
			return
		}
	}
	w.Header().Set("Content-Security-Policy", sandboxCSP) // on the bridge's origin, as the path form
	p.servePublic(w, r, token, "/"+r.PathValue("rest"), "/v1/public/"+token)
}

// servePublic serves a public link's port, or 404 for a token that is not
// (or no longer) one.
func (p *Preview) servePublic(w http.ResponseWriter, r *http.Request, token, path, prefix string) {
	l, ok := p.links.lookup(token)
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no such public link (it may have been revoked)")
		return
	}
	p.forward(w, r, l.thread, l.port, path, prefix)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
