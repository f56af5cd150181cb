package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultMaxUploadBytes is Config.MaxUploadBytes's default: 8 GiB.
const DefaultMaxUploadBytes = 8 << 30

// filesDialTimeout bounds connecting to a thread agent's socket.
const filesDialTimeout = 10 * time.Second

// serveFiles forwards a file transfer (wire.ThreadFilesPath, docs/files.md)
// to the thread's agent over its unix socket, streaming both ways: the
// request body (an upload, at most MaxUploadBytes) and the response (a
// download, with its results trailer). The agent confines paths to the
// workspace. A suspended thread is resumed first. It blocks until the
// transfer ends or the client goes away.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t := s.lookup(id)
	if t == nil { // a suspended thread is resumed for the transfer (suspend.go)
		rt, found, err := s.resumeThread(r.Context(), id)
		switch {
		case !found && err == nil:
			writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("thread %q not found", id))
			return
		case err != nil:
			status, werr := httpError(err)
			writeJSONError(w, status, werr.Code, werr.Message)
			return
		}
		t = rt
	}
	select {
	case <-t.deadCh():
		writeJSONError(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable, "sandbox stopped")
		return
	default:
	}
	limit := s.cfg.MaxUploadBytes
	if limit <= 0 {
		limit = DefaultMaxUploadBytes
	}
	if r.ContentLength > limit {
		writeJSONError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
			fmt.Sprintf("upload of %d bytes is over the limit of %d", r.ContentLength, limit))
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	dirs := t.box.Dirs()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, filesDialTimeout)
			defer cancel()
			return dirs.DialAgent(ctx, fleet.AgentSocket)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	log := t.log.With("method", r.Method, "query", r.URL.RawQuery)
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
				writeJSONError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
					fmt.Sprintf("upload is over the limit of %d bytes", limit))
			case r.Context().Err() != nil:
				log.Debug("file transfer: client went away", "err", err)
			default:
				log.Warn("file transfer", "err", err)
				writeJSONError(w, http.StatusBadGateway, wire.CodeSandboxUnavailable, "reach the agent: "+err.Error())
			}
		},
	}
	log.Debug("file transfer")
	proxy.ServeHTTP(w, r)
}
