package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

// shutdownGrace bounds the graceful HTTP shutdown and the sandbox cleanup.
const shutdownGrace = 30 * time.Second

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, log); err != nil {
		log.Error("bridge stopped", "err", err)
		stop()
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends, then shuts down and removes the
// sandboxes it created.
func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	listen := fs.String("listen", envOr(getenv, "BOXWIRE_BRIDGE_LISTEN", "127.0.0.1:7420"), "address to serve on")
	token := fs.String("token", getenv("BOXWIRE_TOKEN"), "bearer token clients must present (required)")
	image := fs.String("image", envOr(getenv, "BOXWIRE_IMAGE", "boxwire:latest"), "sandbox image")
	dataDir := fs.String("data-dir", envOr(getenv, "BOXWIRE_DATA_DIR", "/var/lib/boxwire"), "state folder")
	model := fs.String("model", getenv("BOXWIRE_MODEL"), "model name passed to agents")
	id := fs.String("id", getenv("BOXWIRE_BRIDGE_ID"), "owner label on this bridge's sandboxes (default: the host name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *token == "" {
		return errors.New("a token is required: --token or BOXWIRE_TOKEN")
	}
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Host: getenv("DOCKER_HOST"), Logger: log.With("component", "sandbox")})
	if err != nil {
		return err
	}
	defer mgr.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := mgr.Ping(pctx); err != nil {
		return fmt.Errorf("the container engine is not reachable (is Docker running? DOCKER_HOST=%q): %w", getenv("DOCKER_HOST"), err)
	}
	cfg := server.Config{
		Token: *token, Image: *image, DataDir: *dataDir, Manager: mgr, Model: *model, BridgeID: *id,
		LLM:      llmproxy.Config{Upstream: envOr(getenv, "OPENAI_BASE_URL", "https://api.openai.com/v1"), APIKey: getenv("OPENAI_API_KEY")},
		Logger:   log,
		Software: "boxwire-bridge/" + version,
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close(ctx)
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening on http://"+ln.Addr().String(), "version", version, "config", cfg)

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-errc:
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

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
