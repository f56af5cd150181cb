package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// handshakeTimeout bounds the sandbox's TLS handshake with the proxy.
const handshakeTimeout = 30 * time.Second

// hopHeaders are not forwarded.
var hopHeaders = []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"}

// intercept answers a CONNECT to a host with a credential: it terminates
// the sandbox's TLS with a leaf signed by Config.CA, then forwards each
// HTTP/1.1 request it reads to the real host over TLS (verified against
// Config.UpstreamRoots), with the credential added. It blocks until the
// sandbox closes the connection, a request fails, or the proxy closes.
func (p *Proxy) intercept(w http.ResponseWriter, r *http.Request, t Target) {
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "boxwire egress: cannot intercept", http.StatusInternalServerError)
		return
	}
	if !p.track(down) {
		down.Close()
		return
	}
	defer p.untrack(down)
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	leaf, err := p.cfg.CA.Leaf(t.Host)
	if err != nil {
		p.log.Warn("egress intercept", "host", t.Host, "err", err)
		return
	}
	conn := tls.Server(&bufferedConn{Conn: down, r: rw.Reader}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := conn.HandshakeContext(r.Context()); err != nil {
		p.log.Info("egress intercept handshake", "host", t.Host, "err", err)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if !p.interceptOne(conn, req.WithContext(r.Context()), t) || req.Close {
			return
		}
	}
}

// interceptOne forwards one request read from the sandbox and writes the
// answer; it reports whether the connection can carry another.
func (p *Proxy) interceptOne(conn net.Conn, req *http.Request, t Target) bool {
	out := req.Clone(req.Context())
	out.RequestURI = ""
	out.URL.Scheme = "https"
	out.URL.Host = t.String()
	if t.Port == 443 {
		out.URL.Host = t.Host
	}
	out.Host = out.URL.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if ok, reason := p.addCredential(req.Context(), out, t); !ok {
		_, _ = io.Copy(io.Discard, req.Body)
		writeRefusal(conn, http.StatusForbidden, "boxwire egress: refused: "+reason)
		return true
	}
	resp, err := p.tlsTransport().RoundTrip(out)
	if err != nil {
		p.log.Warn("egress upstream failed", "host", t.Host, "err", err)
		writeRefusal(conn, http.StatusBadGateway, "boxwire egress: upstream failed: "+err.Error())
		return false
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	return resp.Write(conn) == nil && !resp.Close
}

// tlsTransport is the transport for requests the proxy terminated: TLS to
// the real host, verified against Config.UpstreamRoots (nil: the system's).
func (p *Proxy) tlsTransport() *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.upTLS == nil {
		p.upTLS = &http.Transport{
			Proxy:                 nil,
			DialContext:           p.dialAddr,
			TLSClientConfig:       &tls.Config{RootCAs: p.cfg.UpstreamRoots, MinVersion: tls.VersionTLS12},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: 5 * time.Minute,
		}
	}
	return p.upTLS
}

func writeRefusal(w io.Writer, status int, msg string) {
	body := strings.TrimSpace(msg) + "\n"
	_, _ = io.WriteString(w, "HTTP/1.1 "+strconv.Itoa(status)+" "+http.StatusText(status)+"\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// bufferedConn reads first what the hijack's reader already buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
