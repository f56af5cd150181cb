package forward

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// ForwardedByHeader names the bridge that passed a threads API request on
// (PassOn): the bridge that gets it answers it itself, so a request is
// passed on at most once, even while two bridges disagree for a moment
// about which of them relays the thread.
const ForwardedByHeader = "Boxwire-Forwarded-By"

// PassedOn reports whether another bridge passed r on already.
func PassedOn(r *http.Request) bool { return r.Header.Get(ForwardedByHeader) != "" }

// PassOn answers r, a request about thread id, with the answer of the
// bridge holder that relays the thread, reached at addr (its announced
// base URL), marked as passed on by self. The request keeps its
// credential: the bridges share the store's keys (a browser session is
// per bridge and is refused there). A relay that announced no usable
// address, or cannot be reached, is answered 503 sandbox_unavailable
// naming it.
func PassOn(w http.ResponseWriter, r *http.Request, id, holder, addr, self string, log *slog.Logger) {
	target, err := url.Parse(addr)
	if addr == "" || err != nil {
		httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable,
			"thread "+id+" is relayed by bridge "+holder+", which announced no address this bridge can use")
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedByHeader, self)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			log.Warn("pass a thread request to its relay", "err", err)
			httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable,
				"thread "+id+" is relayed by bridge "+holder+", which this bridge cannot reach: "+err.Error())
		},
	}
	log.Debug("thread request passed to its relay", "method", r.Method, "path", r.URL.Path)
	proxy.ServeHTTP(w, r)
}
