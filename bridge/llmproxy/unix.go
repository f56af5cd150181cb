package llmproxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// socketMode lets the sandbox's user connect; the folder holding the socket
// is what keeps other sandboxes out.
const socketMode = 0o666

// readHeaderTimeout bounds a caller's request headers. There is no write
// timeout: completions stream for as long as the model talks.
const readHeaderTimeout = 10 * time.Second

// Listener is a proxy served on a unix socket. Close stops it.
type Listener struct {
	path string
	srv  *http.Server
	done chan struct{}
}

// ServeUnix listens on a unix socket at path (replacing a stale socket
// file), makes it connectable by any user, and serves p on it in a goroutine
// owned by the returned Listener. It does not block.
func (p *Proxy) ServeUnix(path string) (*Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, socketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	l := &Listener{
		path: path,
		srv: &http.Server{
			Handler:           p,
			ReadHeaderTimeout: readHeaderTimeout,
			ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("llm proxy stopped", "socket", path, "err", err)
		}
	}()
	return l, nil
}

// Path is the socket's path.
func (l *Listener) Path() string { return l.path }

// Close stops listening, cuts live requests (their upstream requests are
// cancelled), waits for the serving goroutine and removes the socket file.
// It is idempotent.
func (l *Listener) Close() error {
	err := l.srv.Close()
	<-l.done
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("remove socket %s: %w", l.path, rerr)
	}
	return err
}
