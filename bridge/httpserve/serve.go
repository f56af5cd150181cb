// Package httpserve serves HTTP on a listener in a goroutine that the
// returned Server owns: Start does not block, Close (or Stop then Wait)
// stops serving and waits for that goroutine. The bridge's unix-socket
// proxies (the LLM proxy, the egress proxy) serve through it.
package httpserve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Config configures Start. Zero values mean defaults.
type Config struct {
	// Name names the server in the log line when serving fails.
	Name string
	// Logger receives that line and the http.Server's own errors; nil
	// discards them.
	Logger *slog.Logger
	// ErrorLevel is the level of the http.Server's own errors (default
	// Info, slog's zero level).
	ErrorLevel slog.Level
	// ReadHeaderTimeout bounds a request's headers; there is no write
	// timeout (a response may stream for as long as it lasts).
	ReadHeaderTimeout time.Duration
}

// Server is an http.Server served on a listener by a goroutine it owns.
type Server struct {
	path string // the address served (a unix socket's path), for messages
	srv  *http.Server
	done chan struct{}
}

// http1 is the one protocol served: the proxies' listeners are plain
// sockets, where HTTP/2 would need prior knowledge no client of theirs
// has. Without it, Serve does not set up an HTTP/2 server for each
// listener (about 1 KiB a sandbox, kept for its life).
var http1 = func() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}()

// Start serves h on ln in a goroutine owned by the returned Server, which
// closes ln. It does not block.
func Start(ln net.Listener, h http.Handler, cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		path: ln.Addr().String(),
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), cfg.ErrorLevel),
			Protocols:         http1,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(cfg.Name+" stopped", "socket", s.path, "err", err)
		}
	}()
	return s
}

// Stop stops listening (a unix listener removes its socket file) and cuts
// live requests; it does not wait for the serving goroutine (see Wait).
// It is idempotent.
func (s *Server) Stop() error {
	if err := s.srv.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// Wait waits for the serving goroutine to end after Stop, at most d (no
// bound when d is 0), and reports whether it ended.
func (s *Server) Wait(d time.Duration) bool {
	if d <= 0 {
		<-s.done
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}

// Close is Stop, then Wait without a bound. It is idempotent.
func (s *Server) Close() error {
	err := s.Stop()
	s.Wait(0)
	return err
}
