package forward

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Sizes and values of the kernel's sock_diag messages for TCP
// (linux/inet_diag.h), which golang.org/x/sys does not define.
const (
	diagReqLen   = 56      // struct inet_diag_req_v2
	diagMsgLen   = 72      // struct inet_diag_msg
	diagListenSt = 1 << 10 // idiag_states: TCP_LISTEN only
	nlHdrLen     = unix.SizeofNlMsghdr
)

// listeningDiag is listening's answer asked of the kernel over
// NETLINK_SOCK_DIAG: a dump of the TCP sockets in the LISTEN state, IPv4
// then IPv6. The kernel then walks only its listening sockets, where a
// read of /proc/net/tcp walks the host's whole connection table, even in
// an empty network namespace: about 1.5 ms of kernel time a table on this
// 24 GiB host, every second in every sandbox (300 idle agents took half of
// two cores that way). An error means the kernel (or a sandbox runtime
// such as gVisor) does not answer; the caller then reads the tables.
func listeningDiag(own *ownSockets) ([]wire.Port, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	buf := diagBuffers.Get().(*[]byte)
	defer diagBuffers.Put(buf)
	seen := map[int]bool{}
	var out []wire.Port
	for i, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		ports, err := dumpListening(fd, *buf, family, uint32(i+1), own)
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			if !seen[p.Port] {
				seen[p.Port] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// diagBuffers are the receive buffers of listeningDiag, kept between the
// looks of a watch (once a second) rather than made anew each time.
var diagBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// dumpListening sends one dump request for family and reads its answer
// into buf until NLMSG_DONE.
func dumpListening(fd int, buf []byte, family uint8, seq uint32, own *ownSockets) ([]wire.Port, error) {
	req := make([]byte, nlHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	req[nlHdrLen], req[nlHdrLen+1] = family, unix.IPPROTO_TCP
	ne.PutUint32(req[nlHdrLen+4:], diagListenSt)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	var out []wire.Port
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag answer: %w", err)
		}
		for msgs := buf[:n]; len(msgs) >= nlHdrLen; {
			size := int(ne.Uint32(msgs[0:]))
			if size < nlHdrLen || size > len(msgs) {
				return nil, errors.New("sock_diag answer: a malformed message")
			}
			body := msgs[nlHdrLen:size]
			switch typ := ne.Uint16(msgs[4:]); {
			case ne.Uint32(msgs[8:]) != seq: // not ours
			case typ == unix.NLMSG_DONE:
				return out, nil
			case typ == unix.NLMSG_ERROR:
				if len(body) >= 4 {
					if errno := int32(ne.Uint32(body)); errno < 0 {
						return nil, fmt.Errorf("sock_diag: %w", unix.Errno(-errno))
					}
				}
				return nil, errors.New("sock_diag: an error answer")
			case typ == unix.SOCK_DIAG_BY_FAMILY && len(body) >= diagMsgLen:
				if p, ok := diagPort(body, own); ok {
					out = append(out, p)
				}
			}
			msgs = msgs[min((size+3)&^3, len(msgs)):] // NLMSG_ALIGN
		}
	}
}

// diagPort is the port of one inet_diag_msg if it listens on a loopback
// or unspecified address and is not one of the agent's own sockets.
func diagPort(m []byte, own *ownSockets) (wire.Port, bool) {
	// idiag_family, state, timer, retrans, then the socket id: sport and
	// dport (network order), src[16], dst[16], if, cookie[2]; then
	// expires, rqueue, wqueue, uid and inode.
	port := int(binary.BigEndian.Uint16(m[4:]))
	var addr netip.Addr
	switch m[0] {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(m[8:12]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16([16]byte(m[8:24])).Unmap()
	default:
		return wire.Port{}, false
	}
	inode := strconv.FormatUint(uint64(binary.NativeEndian.Uint32(m[68:])), 10)
	if (!addr.IsLoopback() && !addr.IsUnspecified()) || own.has(inode) {
		return wire.Port{}, false
	}
	return wire.Port{Port: port, Address: addr.String()}, true
}
