// Package hostcheck refuses requests whose Host header names a host the
// bridge does not serve, with 421 Misdirected Request, before anything
// else (and before any upgrade). It is the defence against DNS
// rebinding: a web page at attacker.example whose name is re-pointed at
// 127.0.0.1 reaches the bridge from the user's browser with Host (and a
// matching Origin) attacker.example. IP literals cannot be rebound and are
// always served; names are served when they are "localhost" (or under
// .localhost) or allowed. /healthz answers any Host, for load balancers.
//
// The server wraps its whole mux in [Handler]. It imports only the
// bridge's HTTP answers and wire.
package hostcheck

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Handler serves a request with next when its Host header is an IP
// address, localhost, or one of allowed (host names, case and a trailing
// dot ignored; "*" allows any), and answers 421 otherwise.
func Handler(allowed []string, next http.Handler) http.Handler {
	names := map[string]bool{}
	for _, h := range allowed {
		names[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || hostAllowed(r.Host, names) {
			next.ServeHTTP(w, r)
			return
		}
		httpjson.Error(w, http.StatusMisdirectedRequest, wire.CodeNotAllowed,
			"this bridge does not serve the host "+quoteHost(r.Host)+": add it to --allowed-hosts (BOXWIRE_ALLOWED_HOSTS)")
	})
}

// hostAllowed reports whether the Host header hostport names an IP
// address, localhost, or one of allowed.
func hostAllowed(hostport string, allowed map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return allowed[host] || allowed["*"]
}

// quoteHost shows a Host header in an error, cut to a sane length.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return `"` + h + `"`
}
