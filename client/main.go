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

	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/cli"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run parses flags and the environment, wires signals, and calls cli.Run.
func run(args []string, stdin *os.File, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "bridge or agent URL: ws(s)://host:port/v1/ws, http(s)://host:port, host:port or unix:/path (default $BOXWIRE_URL, then "+chat.DefaultURL+")")
	token := fs.String("token", "", "bearer token (default $BOXWIRE_TOKEN)")
	thread := fs.String("thread", "", "thread to attach to (default: a new one)")
	message := fs.String("m", "", "send this message, print the turn and exit")
	verbose := fs.Bool("v", false, "log connection details to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	oneShot := false
	fs.Visit(func(f *flag.Flag) { oneShot = oneShot || f.Name == "m" })
	if fs.NArg() > 0 || (oneShot && *message == "") {
		fmt.Fprintln(stderr, "usage: client [--url URL] [--token TOKEN] [--thread ID] [-m \"text\"]")
		return cli.ExitUsage
	}
	cfg := chat.Config{URL: firstSet(*url, os.Getenv("BOXWIRE_URL")), Token: firstSet(*token, os.Getenv("BOXWIRE_TOKEN")), Thread: *thread}
	var logOut io.Writer = io.Discard
	if *verbose {
		logOut = stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)

	return cli.Run(ctx, cli.Options{
		Chat: cfg, Message: *message,
		In: stdin, Out: stdout, Err: stderr,
		Color:      isTerminal(stdout) && os.Getenv("NO_COLOR") == "",
		Interrupts: interrupts,
	})
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
