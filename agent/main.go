// Command agent is the boxwire agent: it runs inside a sandbox container
// and serves the wire protocol (docs/protocol.md) on a unix socket (behind
// the bridge) or on TCP (standalone, with a bearer token). Everything but
// wiring the process is in agent/cli.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxwire/boxwire/agent/cli"
)

// version is set at build time: -ldflags "-X main.version=0.1.0".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, version)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "boxwire-agent:", err)
		os.Exit(1)
	}
}
