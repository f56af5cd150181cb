package cli

import (
	"context"
	"log/slog"

	"github.com/boxwire/boxwire/agent/egress"
)

// startEgress exposes the bridge's egress proxy socket (when the bridge
// gave one) on the sandbox's loopback and returns the proxy variables for
// commands and a function that stops the forwarder and waits for it.
// Without a socket, commands get no proxy and the sandbox has no network.
func startEgress(ctx context.Context, socket string, log *slog.Logger) ([]string, func(), error) {
	if socket == "" {
		return nil, func() {}, nil
	}
	f, err := egress.Listen(egress.DefaultListen, socket, log.With("component", "egress"))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Run(ctx); err != nil {
			log.Error("egress forwarder stopped", "err", err)
		}
	}()
	log.Info("egress proxy exposed", "addr", f.Addr().String(), "socket", socket)
	return egress.Env(f.Addr().String()), func() { cancel(); <-done }, nil
}
