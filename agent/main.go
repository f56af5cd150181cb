// Command agent is the boxwire agent: it runs inside a sandbox container
// and serves the wire protocol (docs/protocol.md) on a unix socket (behind
// the bridge) or on TCP (standalone, with a bearer token).
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/boxwire/boxwire/agent/files"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/posture"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/agent/tools"
)

// version is set at build time: -ldflags "-X main.version=0.1.0".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "boxwire-agent:", err)
		os.Exit(1)
	}
}

// run parses flags (defaults from getenv), then serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", env("BOXWIRE_LISTEN", "0.0.0.0:8080"), "unix:/path or host:port ($BOXWIRE_LISTEN)")
	token := fs.String("token", getenv("BOXWIRE_TOKEN"), "bearer token clients must send; required on TCP ($BOXWIRE_TOKEN)")
	workspace := fs.String("workspace", env("BOXWIRE_WORKSPACE", "/workspace"), "the directory the tools work in ($BOXWIRE_WORKSPACE)")
	model := fs.String("model", env("BOXWIRE_MODEL", loop.DefaultModel), "model name ($BOXWIRE_MODEL)")
	llmSocket := fs.String("llm-socket", getenv("BOXWIRE_LLM_SOCKET"), "unix socket of the bridge's LLM proxy ($BOXWIRE_LLM_SOCKET)")
	termIdle := fs.Duration("terminal-idle", envDuration(getenv, "BOXWIRE_TERMINAL_IDLE", terminal.DefaultIdleTimeout), "close a terminal session after this long without watchers, input or output ($BOXWIRE_TERMINAL_IDLE)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	software := "boxwire-agent/" + version
	if *showVersion {
		fmt.Fprintln(stdout, software)
		return nil
	}
	if !strings.HasPrefix(*listen, "unix:") && *token == "" {
		return fmt.Errorf("listening on TCP %s needs a token: set --token or BOXWIRE_TOKEN", *listen)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))

	llm := loop.OpenAIConfig{BaseURL: getenv("OPENAI_BASE_URL"), APIKey: getenv("OPENAI_API_KEY"), Model: *model}
	tok := &llmToken{} // this sandbox's proxy token, not a model key (llmtoken.go)
	if *llmSocket != "" {
		tok.set(getenv("BOXWIRE_LLM_TOKEN")) // pooled sandboxes get theirs from the bridge's claim
		llm.HTTPClient = tok.client(loop.UnixSocketClient(*llmSocket))
	}
	egressEnv, stopEgress, err := startEgress(ctx, getenv("BOXWIRE_EGRESS_SOCKET"), log)
	if err != nil {
		return err
	}
	defer stopEgress()
	egressEnv, err = trustEnv(egressEnv, getenv("BOXWIRE_CA_CERT")) // approvals: the bridge's egress CA
	if err != nil {
		return err
	}
	pos := posture.Read()
	log.Info("posture", "posture", pos)
	toolSet := tools.New(tools.Config{Workspace: *workspace, Logger: log, Env: egressEnv})
	defer toolSet.Close() // kills background jobs after the server stopped
	srv := session.New(session.Config{
		Loop:     loop.Config{Model: loop.NewOpenAI(llm), Tools: toolSet.All(), Workspace: *workspace},
		Token:    *token,
		Software: software,
		Logger:   log,
		Posture:  &pos,
		Claim:    tok.set,
		Terminal: terminal.Config{IdleTimeout: *termIdle, Env: egressEnv}, // terminals get the egress proxy too
		Files:    files.New(files.Config{Workspace: *workspace, MaxFileBytes: maxFileBytes(getenv), Logger: log}),
	})
	ln, err := session.Listen(*listen)
	if err != nil {
		return err
	}
	log.Info("agent listening", "addr", *listen, "version", version, "workspace", *workspace, "llm", llm, "llm_socket", *llmSocket)
	err = srv.Run(ctx, ln)
	log.Info("agent stopped", "err", err)
	return err
}

// envDuration reads a duration from key, or def when unset or invalid.
func envDuration(getenv func(string) string, key string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(getenv(key))
	if err != nil || d <= 0 {
		return def
	}
	return d
}

// maxFileBytes reads BOXWIRE_MAX_FILE_BYTES, the largest file an upload may
// write (files.DefaultMaxFileBytes when unset or not a positive number).
func maxFileBytes(getenv func(string) string) int64 {
	n, err := strconv.ParseInt(getenv("BOXWIRE_MAX_FILE_BYTES"), 10, 64)
	if err != nil || n <= 0 {
		return files.DefaultMaxFileBytes
	}
	return n
}
