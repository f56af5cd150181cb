package wire

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
)

// The relay carries a sandbox's unix sockets across a single byte stream
// when the bridge does not share a host with the sandbox (Kubernetes pods,
// docs/kubernetes.md). The bridge runs the agent binary's relay in the pod
// over an exec stream and multiplexes that stream (yamux): each
// multiplexed stream opens with one line naming the socket it is for —
// the agent's socket when the bridge opens it, one of the bridge's proxy
// sockets (llm.sock, egress.sock) when the relay opens it — and then
// carries that connection's bytes both ways.

// MaxRelayName is the longest socket name a relay stream may open with.
const MaxRelayName = 64

// ErrRelayName means a relay stream opened with no valid socket name.
var ErrRelayName = errors.New("bad relay socket name")

// ValidRelayName reports whether name can name a relay socket: a plain
// file name of lower-case letters, digits, '.', '_' and '-' that ends in
// ".sock", does not start with '.' and is at most MaxRelayName bytes. It
// can never name a path outside the socket's folder.
func ValidRelayName(name string) bool {
	if len(name) <= len(".sock") || len(name) > MaxRelayName || name[0] == '.' || name[len(name)-len(".sock"):] != ".sock" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// WriteRelayName writes the opening line of a relay stream for the socket
// name.
func WriteRelayName(w io.Writer, name string) error {
	if !ValidRelayName(name) {
		return fmt.Errorf("%w: %q", ErrRelayName, name)
	}
	if _, err := io.WriteString(w, name+"\n"); err != nil {
		return fmt.Errorf("write relay socket name: %w", err)
	}
	return nil
}

// ReadRelayName reads the opening line of a relay stream and returns the
// socket name, reading nothing past the line. A line that is too long or
// names no valid socket is an error wrapping ErrRelayName.
func ReadRelayName(r io.Reader) (string, error) {
	var buf [MaxRelayName + 1]byte
	for n := 0; n < len(buf); n++ {
		if _, err := io.ReadFull(r, buf[n:n+1]); err != nil {
			return "", fmt.Errorf("read relay socket name: %w", err)
		}
		if buf[n] == '\n' {
			name := string(buf[:n])
			if !ValidRelayName(name) {
				return "", fmt.Errorf("%w: %q", ErrRelayName, name)
			}
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: longer than %d bytes", ErrRelayName, MaxRelayName)
}

// halfCloser is a connection whose write side can be closed alone.
type halfCloser interface{ CloseWrite() error }

// RelayPipe copies a to b and b to a until both directions end, closing
// each destination's write half when its source ends (the whole of it
// when it cannot half-close; a yamux stream's Close is a half-close). It
// returns when both copies are done; the caller closes a and b.
func RelayPipe(a, b io.ReadWriteCloser) {
	done := make(chan struct{})
	cp := func(dst, src io.ReadWriteCloser) {
		_, _ = io.Copy(dst, src)
		if hc, ok := dst.(halfCloser); ok {
			_ = hc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go func() {
		defer close(done)
		cp(a, b)
	}()
	cp(b, a)
	<-done
}

// RelayListen listens on the unix socket path for a relay, replacing a
// socket an earlier relay (or bridge process) left there; anything else
// at path is an error, never removed.
func RelayListen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}
