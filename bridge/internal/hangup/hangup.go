// Package hangup tells when the peer of a connection has hung up without
// reading from it: the bridge watches a client whose thread is being
// created (bridge/server ws.go), so a client that leaves stops the
// creation it asked for.
package hangup

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// poll is how often a watched connection is checked for a peer that hung
// up.
const poll = 25 * time.Millisecond

// Watch returns a context that ends with parent or when the peer of nc
// hangs up, whichever comes first. A hijacked WebSocket connection's
// request context does not end when its client goes, so without this a
// client that says hello for a new thread and hangs up at once would still
// get its thread and sandbox, and thirty such hellos would fill the
// sandbox limit. It reads nothing from nc (it only peeks), so what the
// client sent stays for the relay. The returned stop ends the watch and
// waits for its goroutine; call it when creation is over. A connection
// that is not a socket (no syscall.Conn) is never seen to hang up.
func Watch(parent context.Context, nc net.Conn) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return ctx, cancel
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if peerGone(raw) {
				cancel()
				return
			}
		}
	}()
	return ctx, func() {
		cancel()
		<-done
	}
}

// tcpCloseWait is the kernel's TCP_CLOSE_WAIT state: the peer sent FIN.
const tcpCloseWait = 8

// peerGone reports whether the peer of the socket has closed its end: a
// peek that reads end of file or a reset, or, with data still unread, a
// TCP connection in CLOSE_WAIT.
func peerGone(raw syscall.RawConn) bool {
	gone := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == nil && n == 0:
			gone = true
		case errors.Is(err, unix.ECONNRESET), errors.Is(err, unix.EPIPE):
			gone = true
		case err == nil: // unread data: a FIN behind it shows in the TCP state
			if info, ierr := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); ierr == nil {
				gone = info.State == tcpCloseWait
			}
		}
	})
	return gone
}
