package llmscript

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Server timeouts.
const (
	readHeaderTimeout = 10 * time.Second
	shutdownGrace     = 5 * time.Second
)

// Listen opens addr: "unix:/path" for a unix socket (a stale socket file
// at path is removed first), anything else as a TCP host:port such as
// "127.0.0.1:0". The caller owns the listener; [Serve] closes it.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
			}
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// BaseURL is the OpenAI base URL for a client of ln:
// "http://HOST:PORT/v1" for TCP. For a unix socket it is "http://unix/v1":
// the host is only a label, and the client's transport must dial the
// socket.
func BaseURL(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "http://unix/v1"
	}
	return "http://" + ln.Addr().String() + "/v1"
}

// Serve serves h on ln until ctx ends, then shuts down: requests in flight
// see their context end (a scripted delay stops at once), and Serve waits
// for them at most a few seconds before closing their connections. Serve
// closes ln. It returns nil after a shutdown caused by ctx, else the error
// that stopped serving.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), serveErr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown %s: %w", ln.Addr(), err)
	}
	return nil
}
