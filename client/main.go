package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxwire/boxwire/client/cli"
)

func main() {
	os.Exit(run())
}

// run wires the process's signals, arguments, environment and standard
// files to cli.Main.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	return cli.Main(ctx, cli.Program{
		Args: os.Args[1:], Getenv: os.Getenv,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Interrupts: interrupts,
	})
}
