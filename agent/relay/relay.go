package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/boxwire/boxwire/bridge/wire"
)

// dialTimeout bounds connecting a bridge-opened stream to its socket.
const dialTimeout = 5 * time.Second

// Config says what one relay carries.
type Config struct {
	// Serve are the sockets the relay listens on in the sandbox; each
	// connection to one becomes a stream named after the socket's file name.
	Serve []string
	// Dial maps the names the bridge may open streams for to the sockets
	// they connect to in the sandbox; other names are refused.
	Dial map[string]string
	// Logger receives what goes wrong; nil discards it.
	Logger *slog.Logger
}

// Run serves cfg over the multiplexed session on conn (the exec stream:
// stdin and stdout) until conn ends or ctx is cancelled; then it closes
// its listeners, removes their sockets and waits for every connection it
// carries to end. A relay whose session the bridge closes returns nil.
func Run(ctx context.Context, conn io.ReadWriteCloser, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for name, path := range cfg.Dial {
		if !wire.ValidRelayName(name) || path == "" {
			return fmt.Errorf("relay: bad dial %q=%q", name, path)
		}
	}
	ycfg := yamux.DefaultConfig()
	ycfg.LogOutput = io.Discard
	sess, err := yamux.Server(conn, ycfg)
	if err != nil {
		return fmt.Errorf("relay session: %w", err)
	}
	r := &relay{sess: sess, dial: cfg.Dial, log: log}
	defer r.wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the wait: ends every connection still carried
	context.AfterFunc(ctx, func() { sess.Close() })
	var lns []*net.UnixListener
	defer func() {
		for _, ln := range lns {
			ln.Close() // removes the socket file (unlink on close)
		}
	}()
	for _, path := range cfg.Serve {
		ln, err := listen(path)
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		r.wg.Add(1)
		go r.serve(ctx, ln, filepath.Base(path))
	}
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("relay: accept: %w", err)
		}
		r.wg.Add(1)
		go r.toSandbox(ctx, st)
	}
}

// relay is one Run's state; wg counts its goroutines.
type relay struct {
	sess *yamux.Session
	dial map[string]string
	log  *slog.Logger
	wg   sync.WaitGroup
}

// listen makes the relay's listener at path (wire.RelayListen), which
// must be named like a relay socket.
func listen(path string) (*net.UnixListener, error) {
	if name := filepath.Base(path); !wire.ValidRelayName(name) {
		return nil, fmt.Errorf("relay: serve %s: %w", path, wire.ErrRelayName)
	}
	ln, err := wire.RelayListen(path)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return ln, nil
}

// serve turns each connection to ln into a stream named name, until ln
// is closed (Run closes it on its way out).
func (r *relay) serve(ctx context.Context, ln *net.UnixListener, name string) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.toBridge(ctx, c, name)
	}
}

// toBridge carries the sandbox's connection c to the bridge's socket name,
// until both ends are done or ctx ends.
func (r *relay) toBridge(ctx context.Context, c net.Conn, name string) {
	defer r.wg.Done()
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	st, err := r.sess.OpenStream()
	if err != nil {
		r.log.Warn("relay: open stream", "socket", name, "err", err)
		return
	}
	defer st.Close()
	if err := wire.WriteRelayName(st, name); err != nil {
		return
	}
	wire.RelayPipe(c, st)
}

// toSandbox connects a stream the bridge opened to the socket it names,
// until both ends are done or ctx ends.
func (r *relay) toSandbox(ctx context.Context, st *yamux.Stream) {
	defer r.wg.Done()
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(dialTimeout))
	name, err := wire.ReadRelayName(st)
	st.SetReadDeadline(time.Time{})
	if err != nil {
		r.log.Warn("relay: stream from the bridge", "err", err)
		return
	}
	path, ok := r.dial[name]
	if !ok {
		r.log.Warn("relay: the bridge asked for an unknown socket", "socket", name)
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.Dial("unix", path)
	if err != nil {
		return // not listening yet: the bridge tries again
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	wire.RelayPipe(c, st)
}
