package server

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/boxwire/boxwire/bridge/preview"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Preview URLs, public links and forwards (bridge/preview, docs/preview.md)
// reach a thread's ports through its agent link's streams.

// newPreview makes the Handler's preview; guard is the threads' own
// authentication and ownership check.
func (s *Server) newPreview() (*preview.Preview, func(http.Handler) http.Handler) {
	pv, err := preview.New(preview.Config{Backend: previewBackend{s}, Domain: s.cfg.PreviewDomain, Logger: s.log.With("component", "preview")})
	if err != nil {
		panic(err) // the backend is set: a programming error
	}
	u := s.users
	return pv, func(h http.Handler) http.Handler { return u.Auth(u.Owned(h)) }
}

// previewBackend is preview.Backend over the server's live threads.
type previewBackend struct{ s *Server }

// DialPort opens a stream on the thread's agent link.
func (b previewBackend) DialPort(ctx context.Context, thread string, port int) (net.Conn, error) {
	t, err := b.live(thread)
	if err != nil {
		return nil, err
	}
	st, err := t.link.Streams().Dial(ctx, port)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Ports asks the thread's agent what listens.
func (b previewBackend) Ports(ctx context.Context, thread string) ([]wire.Port, error) {
	t, err := b.live(thread)
	if err != nil {
		return nil, err
	}
	return t.link.Streams().Ports(ctx)
}

// live is thread's live thread: one with a sandbox (a suspended thread
// has none; attaching to it resumes it).
func (b previewBackend) live(thread string) (*thread, error) {
	t := b.s.lookup(thread)
	if t == nil {
		return nil, wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf("thread %q has no running sandbox (a suspended thread resumes when a client attaches)", thread)}
	}
	return t, nil
}
