package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxwire/boxwire/bridge/server"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

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

// run parses args and serves until ctx ends (server.Run), leaving the
// sandboxes for the next start to adopt. "gc" as the first argument removes
// them instead (see runGC); "users", "keys" and "audit" manage users, API
// keys and read the audit log (admin.go); "images" lists the images in use
// by the running bridge (images.go); "status" lists the bridges on the
// store and their threads (status.go).
func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	if len(args) > 0 && args[0] == "gc" {
		return runGC(ctx, args[1:], getenv, log)
	}
	if len(args) > 0 && args[0] == "images" {
		return runImages(ctx, args[1:], getenv, os.Stdout) // images.go
	}
	if len(args) > 0 && args[0] == "status" {
		return runStatus(ctx, args[1:], getenv, os.Stdout) // status.go
	}
	if len(args) > 0 && (args[0] == "users" || args[0] == "keys" || args[0] == "audit") {
		return runAdmin(ctx, args[0], args[1:], getenv, os.Stdout) // admin.go
	}
	o, err := parseOptions("bridge", args, getenv)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	mgr, err := o.connectEngine(ctx, getenv, log) // options_engine.go
	if err != nil {
		return err
	}
	defer mgr.Close()
	cfg, err := o.server(mgr, getenv, log)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1) // SIGHUP reloads the image allowlist (--images-file)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg.Reload = hup
	return server.Run(ctx, cfg, o.listen)
}

// runGC removes every sandbox, volume, workspace image and socket folder
// of this bridge id, and its stored threads.
func runGC(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	o, err := parseOptions("bridge gc", args, getenv)
	if err != nil {
		return err
	}
	o.workspaceSize = 0 // gc makes no workspace: no loop device check
	mgr, err := o.connectEngine(ctx, getenv, log)
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
	n, v, err := server.CollectIn(ctx, mgr, id, o.dataDir, o.store)
	w, werr := collectWorkspaces(ctx, mgr) // images no volume names
	log.Info("gc done", "bridge_id", id, "sandboxes_removed", n, "volumes_removed", v, "workspace_images_removed", w)
	return errors.Join(err, werr)
}
