package llmproxy

import (
	"log/slog"
	"net"
	"time"

	"github.com/boxwire/boxwire/bridge/httpserve"
)

// readHeaderTimeout bounds a caller's request headers. There is no write
// timeout: completions stream for as long as the model talks.
const readHeaderTimeout = 10 * time.Second

// Listener is a proxy served on a listener. Close stops it.
type Listener struct{ srv *httpserve.Server }

// Serve serves p on ln in a goroutine owned by the returned Listener, which
// closes ln. It does not block. The bridge gives it a unix socket in a
// folder only the bridge can write (bridge/boxdir), so that the socket's
// name and mode cannot be turned against the host.
func (p *Proxy) Serve(ln net.Listener) *Listener {
	return &Listener{srv: httpserve.Start(ln, p, httpserve.Config{
		Name: "llm proxy", Logger: p.log, ErrorLevel: slog.LevelWarn, ReadHeaderTimeout: readHeaderTimeout,
	})}
}

// Close stops listening (a unix listener removes its socket file), cuts
// live requests (their upstream requests are cancelled) and waits for the
// serving goroutine. It is idempotent.
func (l *Listener) Close() error { return l.srv.Close() }
