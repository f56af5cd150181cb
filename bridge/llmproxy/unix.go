package llmproxy

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// readHeaderTimeout bounds a caller's request headers. There is no write
// timeout: completions stream for as long as the model talks.
const readHeaderTimeout = 10 * time.Second

// Listener is a proxy served on a listener. Close stops it.
type Listener struct {
	path string
	srv  *http.Server
	done chan struct{}
}

// Serve serves p on ln in a goroutine owned by the returned Listener, which
// closes ln. It does not block. The bridge gives it a unix socket in a
// folder only the bridge can write (bridge/boxdir), so that the socket's
// name and mode cannot be turned against the host.
func (p *Proxy) Serve(ln net.Listener) *Listener {
	l := &Listener{
		path: ln.Addr().String(),
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
			p.log.Error("llm proxy stopped", "socket", l.path, "err", err)
		}
	}()
	return l
}

// Path is the address served: the socket's path.
func (l *Listener) Path() string { return l.path }

// Close stops listening (a unix listener removes its socket file), cuts
// live requests (their upstream requests are cancelled) and waits for the
// serving goroutine. It is idempotent.
func (l *Listener) Close() error {
	err := l.srv.Close()
	<-l.done
	return err
}
