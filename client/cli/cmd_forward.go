package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/boxwire/boxwire/client/chat"
)

// runForward is "client forward": Forward, ended by Ctrl-C.
func runForward(ctx context.Context, inv *invocation, args []string) int {
	ctx, cancel := untilInterrupt(ctx, inv)
	defer cancel()
	return Forward(ctx, inv.chat, args, inv.p.Stdout, inv.p.Stderr)
}

// untilInterrupt is ctx, also ended by Ctrl-C. The caller must call
// cancel, which also ends the goroutine watching for Ctrl-C.
func untilInterrupt(ctx context.Context, inv *invocation) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() { // ends with ctx, at the latest when the caller cancels
		select {
		case <-inv.p.Interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// runPorts is "client ports".
func runPorts(ctx context.Context, inv *invocation, args []string) int {
	return Ports(ctx, inv.chat, args, inv.p.Stdout, inv.p.Stderr)
}

// Forward is "client forward THREAD PORT[:LOCAL]": it listens on the
// user's loopback, 127.0.0.1:LOCAL (default PORT; 0 picks a free one), and
// carries each connection to PORT on the sandbox's own loopback through
// the bridge, like kubectl port-forward. It prints where it listens on
// out and a line per failed connection on errw, and returns when ctx ends
// (ExitOK, after the live connections closed) or the local port cannot
// be had (ExitUsage).
func Forward(ctx context.Context, cfg chat.Config, args []string, out, errw io.Writer) int {
	thread, port, local, err := forwardArgs(args)
	if err != nil {
		fmt.Fprintln(errw, "boxwire:", err)
		fmt.Fprintln(errw, "usage: client [flags] forward THREAD PORT[:LOCAL]")
		return ExitUsage
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	if err != nil {
		fmt.Fprintf(errw, "boxwire: forward: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(out, "forwarding %s -> port %d of thread %s (Ctrl-C stops)\n", ln.Addr(), port, thread)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ExitOK
			}
			fmt.Fprintf(errw, "boxwire: forward: %v\n", err)
			return ExitUsage
		}
		wg.Go(func() {
			if err := forwardOne(ctx, cfg, thread, port, c); err != nil {
				fmt.Fprintf(errw, "boxwire: forward: %v\n", err)
			}
		})
	}
}

// forwardArgs reads THREAD PORT[:LOCAL].
func forwardArgs(args []string) (thread string, port, local int, err error) {
	if len(args) != 2 || args[0] == "" {
		return "", 0, 0, errors.New("forward needs a thread and a port")
	}
	remote, loc, hasLocal := strings.Cut(args[1], ":")
	if port, err = portNumber(remote, false); err != nil {
		return "", 0, 0, err
	}
	local = port
	if hasLocal {
		if local, err = portNumber(loc, true); err != nil {
			return "", 0, 0, err
		}
	}
	return args[0], port, local, nil
}

func portNumber(s string, zeroOK bool) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
		return 0, fmt.Errorf("%q is not a port (1 to 65535)", s)
	}
	return n, nil
}

// forwardOne carries local to the sandbox port until both directions
// ended or ctx does; it closes local.
func forwardOne(ctx context.Context, cfg chat.Config, thread string, port int, local net.Conn) error {
	defer local.Close()
	remote, err := chat.DialPort(ctx, cfg, thread, port)
	if err != nil {
		return err
	}
	defer remote.Close()
	stop := context.AfterFunc(ctx, func() { remote.Close(); local.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(remote, local)
		closeWrite(remote)
	})
	_, err = io.Copy(local, remote)
	if err != nil {
		local.Close() // the sandbox side failed: end the other direction too
	} else {
		closeWrite(local)
	}
	wg.Wait()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// Ports is "client ports THREAD": what listens in the thread's sandbox,
// with its preview URLs, as a table on out.
func Ports(ctx context.Context, cfg chat.Config, args []string, out, errw io.Writer) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(errw, "usage: client [flags] ports THREAD")
		return ExitUsage
	}
	ports, err := chat.Ports(ctx, cfg, args[0])
	if err != nil {
		fmt.Fprintln(errw, "boxwire:", err)
		return ExitUsage
	}
	if len(ports) == 0 {
		fmt.Fprintln(out, "nothing listens in the sandbox")
		return ExitOK
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tADDRESS\tPREVIEW\tPUBLIC")
	for _, p := range ports {
		preview := p.URL
		if p.HostURL != "" {
			preview = p.HostURL
		}
		public := p.Public
		if p.PublicHost != "" {
			public = p.PublicHost
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Port, p.Address, preview, public)
	}
	_ = tw.Flush()
	return ExitOK
}
