package egress

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"

	"github.com/boxwire/boxwire/bridge/httpserve"
)

// tunnel answers CONNECT: it dials t, hijacks the caller's connection and
// copies both ways until either side closes (or the proxy closes).
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, t Target) {
	up, err := p.dial(r.Context(), t)
	if err != nil {
		p.log.Warn("egress connect failed", "host", t.Host, "err", err)
		http.Error(w, "boxwire egress: connect failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "boxwire egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	if !p.track(up, down) {
		up.Close()
		down.Close()
		return
	}
	defer p.untrack(up, down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Add under the lock, and only while open: closeTunnels sets closed
	// under it before it waits, so no Add can race with that Wait.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(down, up)
		down.Close()
		up.Close()
	}()
	_, _ = io.Copy(up, rw) // rw holds what the caller sent after the headers
	up.Close()
	down.Close()
}

// track records a live tunnel so Close can cut it; false if closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.tunnels, c)
	}
}

// closeTunnels cuts every live tunnel and waits for their goroutines.
func (p *Proxy) closeTunnels() {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
}

// Listener is a proxy served on a listener.
type Listener struct {
	srv *httpserve.Server
	p   *Proxy
}

// Serve serves p on ln in a goroutine owned by the returned Listener, which
// closes ln. It does not block. The bridge gives it a unix socket in a
// folder only the bridge can write (bridge/boxdir).
func (p *Proxy) Serve(ln net.Listener) *Listener {
	return &Listener{p: p, srv: httpserve.Start(ln, p, httpserve.Config{
		Name: "egress proxy", Logger: p.log, ErrorLevel: slog.LevelDebug, ReadHeaderTimeout: readHeaderTimeout,
	})}
}

// Close stops listening (a unix listener removes its socket file), cuts
// live requests and tunnels and waits for the proxy's goroutines, at most
// dialTimeout for the serving one. It is idempotent.
func (l *Listener) Close() error {
	err := l.srv.Stop()
	l.p.closeTunnels()
	if !l.srv.Wait(dialTimeout) {
		return errors.New("egress proxy did not stop")
	}
	return err
}
