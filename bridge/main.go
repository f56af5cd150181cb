package main

import (
	"context"
	"errors"
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

// run parses args, serves until ctx ends, then shuts down, leaving the
// sandboxes for the next start to adopt. "gc" as the first argument removes
// them instead (see runGC).
func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	if len(args) > 0 && args[0] == "gc" {
		return runGC(ctx, args[1:], getenv, log)
	}
	o, err := parseOptions("bridge", args, getenv)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	mgr, err := connect(ctx, o, getenv, log)
	if err != nil {
		return err
	}
	defer mgr.Close()
	cfg := server.Config{
		Token: o.token, Image: o.image, DataDir: o.dataDir, Manager: mgr, Model: o.model, BridgeID: o.id,
		LLM:    llmproxy.Config{Upstream: envOr(getenv, "OPENAI_BASE_URL", "https://api.openai.com/v1"), APIKey: getenv("OPENAI_API_KEY")},
		Logger: log, Software: "boxwire-bridge/" + version,
		Images: o.images, Runtime: o.runtime, Runtimes: o.runtimes, MaxSandboxes: o.maxSandboxes, Pool: o.pool, PoolIdle: o.poolIdle,
		IdleTTL: o.idleTTL, MaxLifetime: o.maxLifetime, ReapInterval: o.reapInterval,
		ThreadTTL: o.threadTTL, RecycleGrace: o.recycleGrace,
		MaxUploadBytes: o.maxUpload,
		Retention:      o.retention, MaxStoredOutput: o.logOutputCap, StoreSync: o.storeSync,
	}
	if err := applySecurity(&cfg, getenv); err != nil {
		return err
	}
	cfg.EgressThreadMax = o.egressThreadMax // docs/egress-thread.md
	if err := applyApprovals(&cfg, o.policy, getenv); err != nil {
		return err
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Reconcile(ctx); err != nil {
		_ = srv.Close(ctx)
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
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
		log.Info("shutting down; sandboxes stay for the next start (bridge gc removes them)")
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

// runGC removes every sandbox, volume and socket folder of this bridge id.
func runGC(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	o, err := parseOptions("bridge gc", args, getenv)
	if err != nil {
		return err
	}
	o.workspaceSize = 0 // gc makes no workspace: no loop device check
	mgr, err := connect(ctx, o, getenv, log)
	if err != nil {
		return err
	}
	defer mgr.Close()
	id := o.id
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return fmt.Errorf("bridge id: %w", err)
		}
	}
	n, v, err := server.Collect(ctx, mgr, id, o.dataDir)
	w, werr := mgr.CollectWorkspaces(ctx) // images no volume names
	log.Info("gc done", "bridge_id", id, "sandboxes_removed", n, "volumes_removed", v, "workspace_images_removed", w)
	return errors.Join(err, werr)
}

// connect makes the sandbox manager and checks that the engine answers.
func connect(ctx context.Context, o options, getenv func(string) string, log *slog.Logger) (*sandbox.Docker, error) {
	dcfg, err := o.docker(getenv, log)
	if err != nil {
		return nil, err
	}
	mgr, err := sandbox.NewDocker(dcfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := mgr.Ping(pctx); err != nil {
		mgr.Close()
		return nil, fmt.Errorf("the container engine is not reachable (is Docker running? DOCKER_HOST=%q): %w", getenv("DOCKER_HOST"), err)
	}
	if err := mgr.CheckWorkspaces(pctx); err != nil {
		mgr.Close()
		return nil, fmt.Errorf("--workspace-size (%d bytes) needs loop devices, mkfs.ext4, debugfs and losetup, as root on the engine's host (or set --workspace-size 0 for an uncapped workspace): %w", o.workspaceSize, err)
	}
	return mgr, nil
}
