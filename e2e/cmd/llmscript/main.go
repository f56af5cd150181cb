// Command llmscript serves a scripted OpenAI-compatible chat-completions API
// for tests and demos:
//
//	llmscript --script FILE --listen 127.0.0.1:0|unix:/path [--api-key K] [--debug]
//
// It prints one line, "listening on http://ADDR/v1" (for a unix socket
// "listening on unix:/path (http://unix/v1)"), and serves until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxwire/boxwire/e2e/llmscript"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "llmscript:", err)
		}
		os.Exit(2)
	}
}

// run parses args, loads the script and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmscript", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scriptPath := fs.String("script", "", "script `file` (JSON)")
	listen := fs.String("listen", "127.0.0.1:0", "listen `address`: host:port or unix:/path")
	apiKey := fs.String("api-key", "", "require this bearer `key` on every request")
	debug := fs.Bool("debug", false, "log every request to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *scriptPath == "" {
		return errors.New("--script is required")
	}
	script, err := llmscript.Load(*scriptPath)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv := llmscript.New(script, llmscript.Options{APIKey: *apiKey, Logger: log})

	ln, err := llmscript.Listen(*listen)
	if err != nil {
		return err
	}
	if ln.Addr().Network() == "unix" {
		fmt.Fprintf(stdout, "listening on unix:%s (%s)\n", ln.Addr(), llmscript.BaseURL(ln))
	} else {
		fmt.Fprintf(stdout, "listening on %s\n", llmscript.BaseURL(ln))
	}
	return llmscript.Serve(ctx, ln, srv)
}
