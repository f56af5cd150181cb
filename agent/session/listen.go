package session

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// SocketMode is the permission of a unix socket opened by Listen: the
// owner and its group (the bridge) may connect.
const SocketMode = 0o660

// Listen opens addr: "unix:/path" for a unix socket, anything else as a
// TCP "host:port". A stale socket file at path is removed first and the
// new socket is given SocketMode. The caller owns (and closes) the
// listener; Run closes it.
func Listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return ln, nil
}
