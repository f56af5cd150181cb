package server

import (
	"context"
	"net"
	"net/http"

	"github.com/boxwire/boxwire/bridge/files"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultMaxUploadBytes is Config.MaxUploadBytes's default: 8 GiB.
const DefaultMaxUploadBytes = files.DefaultMaxUploadBytes

// serveFiles forwards a file transfer (wire.ThreadFilesPath, docs/files.md)
// to the thread's agent over its unix socket (bridge/files: at most
// MaxUploadBytes up). A suspended thread is resumed first. It blocks until
// the transfer ends or the client goes away.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t := s.lookup(id)
	if t == nil { // a suspended thread is resumed for the transfer (suspend.go)
		rt, found, err := s.resumeThread(r.Context(), id)
		switch {
		case !found && err == nil:
			httpjson.NotFound(w, id)
			return
		case err != nil:
			status, werr := httpError(err)
			httpjson.Error(w, status, werr.Code, werr.Message)
			return
		}
		t = rt
	}
	select {
	case <-t.deadCh():
		httpjson.Error(w, http.StatusServiceUnavailable, wire.CodeSandboxUnavailable, "sandbox stopped")
		return
	default:
	}
	dirs := t.box.Dirs()
	files.Proxy{Limit: s.cfg.MaxUploadBytes, Log: t.log,
		Dial: func(ctx context.Context) (net.Conn, error) { return dirs.DialAgent(ctx, fleet.AgentSocket) },
	}.ServeHTTP(w, r)
}
