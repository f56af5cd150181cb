package web

import (
	"net"
	"net/http"

	"github.com/boxwire/boxwire/bridge/wire"
)

// contentSecurityPolicy is every page asset's CSP: scripts, styles and
// connections of the bridge's own origin only, no framing, no plugins.
// Inline styles are allowed because xterm.js's DOM renderer sets them;
// inline scripts are not.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Routes mounts the browser session routes (POST and GET /v1/login, POST
// /v1/logout, GET /v1/login/options, and with OIDC sign-in GET
// /v1/login/oidc and its callback) and the page (GET / and its assets)
// on mux. None needs
// credentials: the page logs in itself. Over plain HTTP on an address
// other than loopback, without Config.InsecureHTTP, the page and login
// are refused (403) so that no cookie travels in clear.
func (s *Sessions) Routes(mux *http.ServeMux) {
	mux.Handle("POST /v1/login", s.needTLS(http.HandlerFunc(s.postLogin)))
	mux.Handle("GET /v1/login", s.needTLS(http.HandlerFunc(s.getLogin)))
	mux.HandleFunc("POST /v1/logout", s.postLogout)
	mux.HandleFunc("GET /v1/login/options", s.loginOptions)
	if s.oidc != nil {
		mux.Handle("GET /v1/login/oidc", s.needTLS(http.HandlerFunc(s.oidcStart)))
		mux.Handle("GET "+callbackURL, s.needTLS(http.HandlerFunc(s.oidcCallback)))
	}
	files := http.FileServerFS(Assets())
	page := s.needTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.Handle("GET /{$}", page)
	for _, name := range []string{"/app.js", "/app.css"} {
		mux.Handle("GET "+name, page)
	}
}

// needTLS refuses plain HTTP that did not come in on a loopback address,
// unless Config.InsecureHTTP.
func (s *Sessions) needTLS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !s.cfg.InsecureHTTP && !onLoopback(r) {
			writeError(w, http.StatusForbidden, wire.CodeNotAllowed,
				"the web page and its login need TLS beyond loopback: start the bridge with --tls-cert and --tls-key (or --insecure-http)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// onLoopback reports whether r came in on a loopback address (the
// listener's side of its connection), or from no network at all.
func onLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
