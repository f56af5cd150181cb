package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds the graceful HTTP shutdown and Close on the way out
// of Run.
const shutdownGrace = 30 * time.Second

// Run is the bridge's whole life: it makes the server (New), adopts what
// an earlier run left (Reconcile), serves HTTP and WebSockets on addr, and
// when ctx ends (or serving fails) shuts down, leaving the sandboxes for
// the next start to adopt. It serves HTTPS when cfg.TLSCert and
// cfg.TLSKey are set. It logs "listening on http://ADDR" (https://) once
// it accepts connections. It blocks until the shutdown is over.
func Run(ctx context.Context, cfg Config, addr string) error {
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Reconcile(ctx); err != nil {
		_ = srv.Close(ctx)
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = srv.Close(ctx)
		return fmt.Errorf("listen: %w", err)
	}
	log := srv.log
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			_ = ln.Close()
			_ = srv.Close(ctx)
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		ln, scheme = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https"
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }() // ends with hs.Shutdown below
	log.Info("listening on "+scheme+"://"+ln.Addr().String(), "software", cfg.Software, "config", srv.cfg)
	srv.announce(scheme + "://" + ln.Addr().String()) // to the other bridges on the store (forward.go)

	for done := false; !done; {
		select {
		case <-ctx.Done():
			log.Info("shutting down; sandboxes stay for the next start (bridge gc removes them)")
			done = true
		case err = <-errc:
			done = true
		case <-cfg.Reload: // main: SIGHUP; a nil channel never fires
			srv.roll.ReloadImages() // bridge/rollout
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	serr := hs.Shutdown(sctx) // WebSockets are hijacked: srv.Close ends them
	cerr := srv.Close(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, serr, cerr)
}
