package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// DefaultListen is where commands find the proxy.
const DefaultListen = "127.0.0.1:3128"

// dialTimeout bounds connecting to the bridge's socket.
const dialTimeout = 10 * time.Second

// Env returns the proxy variables for commands when the proxy listens on
// addr (upper- and lower-case, as tools differ in which they read).
func Env(addr string) []string {
	u := "http://" + addr
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "NO_PROXY=" + noProxy,
		"http_proxy=" + u, "https_proxy=" + u, "no_proxy=" + noProxy,
	}
}

// Forwarder accepts TCP connections and pipes each to a new connection to
// a unix socket.
type Forwarder struct {
	ln     net.Listener
	socket string
	log    *slog.Logger
}

// Listen listens on addr (a loopback host:port) for connections to forward
// to socket. It does not block; call Run.
func Listen(addr, socket string, log *slog.Logger) (*Forwarder, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("egress listen on %s: %w", addr, err)
	}
	return &Forwarder{ln: ln, socket: socket, log: log}, nil
}

// Addr is the listening address.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Run forwards connections until ctx ends, then closes the listener and
// every live connection and waits for their goroutines. It returns nil
// after ctx ends, or the accept error that stopped it.
func (f *Forwarder) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { f.ln.Close() })
	defer stop()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f.ln.Close()
			return fmt.Errorf("egress accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.pipe(ctx, c)
		}()
	}
}

// pipe copies between c and a new socket connection until either closes
// or ctx ends.
func (f *Forwarder) pipe(ctx context.Context, c net.Conn) {
	defer c.Close()
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(ctx, "unix", f.socket)
	if err != nil {
		f.log.Warn("egress proxy unreachable", "socket", f.socket, "err", err)
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nboxwire egress: the bridge's egress proxy is unreachable\n")
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, c)
		closeWrite(up)
	}()
	_, err = io.Copy(c, up)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		f.log.Debug("egress pipe", "err", err)
	}
	c.Close()
	up.Close()
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
