package server

import (
	"net/http"

	"github.com/boxwire/boxwire/bridge/web"
)

// contentSecurityPolicy is every page asset's CSP: scripts, styles and
// connections of the bridge's own origin only, no framing, no plugins.
// Inline styles are allowed because xterm.js's DOM renderer sets them;
// inline scripts are not.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// webRoutes serves the page (bridge/web) at / and its assets, without
// authentication: the page itself logs in (login.go).
func (s *Server) webRoutes(mux *http.ServeMux) {
	files := http.FileServerFS(web.Assets())
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.Handle("GET /{$}", page)
	for _, name := range []string{"/app.js", "/app.css"} {
		mux.Handle("GET "+name, page)
	}
}
