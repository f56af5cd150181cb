// Package files forwards the bridge's file transfers (wire.ThreadFilesPath,
// docs/files.md) to a thread's agent over its unix socket, streaming both
// ways: the request body (an upload, capped) and the response (a download,
// with its results trailer). The agent confines paths to the workspace;
// the bridge only carries the bytes.
//
// The server finds (or resumes) the thread and serves the request with a
// [Proxy] that dials that thread's agent. It imports only the bridge's
// HTTP answers and wire.
package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultMaxUploadBytes is the upload cap when Proxy.Limit is 0: 8 GiB.
const DefaultMaxUploadBytes = 8 << 30

// dialTimeout bounds connecting to the agent's socket.
const dialTimeout = 10 * time.Second

// Proxy forwards one thread's file transfers to its agent.
type Proxy struct {
	// Dial connects to the agent's HTTP socket.
	Dial func(ctx context.Context) (net.Conn, error)
	// Limit caps an upload's bytes; 0 means DefaultMaxUploadBytes.
	Limit int64
	// Log receives the transfer's logs; required.
	Log *slog.Logger
}

// ServeHTTP forwards r to the agent and its answer back: 413 for an
// upload over the limit (before it is read, when its length says so), 502
// when the agent cannot be reached. It blocks until the transfer ends or
// the client goes away.
func (p Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultMaxUploadBytes
	}
	if r.ContentLength > limit {
		httpjson.Error(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
			fmt.Sprintf("upload of %d bytes is over the limit of %d", r.ContentLength, limit))
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			defer cancel()
			return p.Dial(ctx)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	log := p.Log.With("method", r.Method, "query", r.URL.RawQuery)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "agent"
			pr.Out.URL.Path, pr.Out.URL.RawPath = wire.FilesPath, ""
			pr.Out.Host = "agent"
			pr.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				httpjson.Error(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
					fmt.Sprintf("upload is over the limit of %d bytes", limit))
			case r.Context().Err() != nil:
				log.Debug("file transfer: client went away", "err", err)
			default:
				log.Warn("file transfer", "err", err)
				httpjson.Error(w, http.StatusBadGateway, wire.CodeSandboxUnavailable, "reach the agent: "+err.Error())
			}
		},
	}
	log.Debug("file transfer")
	proxy.ServeHTTP(w, r)
}
