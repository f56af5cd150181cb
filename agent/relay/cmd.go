package relay

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Main runs `boxwire-agent relay` with args (after the word relay) on the
// session carried by stdin and stdout, logging to stderr:
//
//	relay --serve /run/boxwire/llm.sock --dial agent.sock=/run/boxwire-agent/agent.sock
//
// --serve and --dial may be given more than once. It returns when the
// bridge ends the session or ctx ends.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout io.WriteCloser, stderr io.Writer) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	cfg.Dial = map[string]string{}
	fs.Func("serve", "a socket to listen on in the sandbox, carried to the bridge's socket of the same name", func(v string) error {
		cfg.Serve = append(cfg.Serve, v)
		return nil
	})
	fs.Func("dial", "NAME=PATH: a stream the bridge opens for NAME connects to the socket PATH", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || path == "" {
			return fmt.Errorf("want NAME=PATH, got %q", v)
		}
		cfg.Dial[name] = path
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("relay: unexpected arguments %q", fs.Args())
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, nil)).With("component", "relay")
	return Run(ctx, stdio{stdin, stdout}, cfg)
}

// stdio is the exec stream: stdin to read, stdout to write.
type stdio struct {
	io.Reader
	w io.WriteCloser
}

func (s stdio) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s stdio) Close() error                { return s.w.Close() }
