package forward

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// tcpListen is the state column's value of a listening socket.
const tcpListen = "0A"

// Tables are the files Listening reads, and Self the process whose own
// sockets it leaves out; tests point them elsewhere.
type Tables struct {
	// TCP4 and TCP6 default to /proc/net/tcp and /proc/net/tcp6. With
	// neither set, Listening and Watch first ask the kernel for the
	// listening sockets over sock_diag (diag_linux.go: it walks only those,
	// a table read walks every connection of the host), and read the
	// default tables when it does not answer.
	TCP4, TCP6 string
	// FDs defaults to /proc/self/fd.
	FDs string
}

func (t Tables) withDefaults() Tables {
	if t.TCP4 == "" {
		t.TCP4 = "/proc/net/tcp"
	}
	if t.TCP6 == "" {
		t.TCP6 = "/proc/net/tcp6"
	}
	if t.FDs == "" {
		t.FDs = "/proc/self/fd"
	}
	return t
}

// Listening returns the TCP ports that listen where the agent can dial
// them — the loopback or every address — sorted by port, one entry per
// port (the first address found, IPv4 first). Sockets of the agent's own
// process (its TCP listener, the egress forwarder) are left out.
func Listening(t Tables) ([]wire.Port, error) {
	return newLister(t).list()
}

// lister is Listening's state across the looks of a Watch: the agent's
// own sockets, and the kernel's answer to ask first (listeningDiag; nil:
// the tables are read).
type lister struct {
	t    Tables
	own  *ownSockets
	diag func(*ownSockets) ([]wire.Port, error)
}

func newLister(t Tables) *lister {
	l := &lister{}
	if t.TCP4 == "" && t.TCP6 == "" {
		l.diag = listeningDiag
	}
	l.t = t.withDefaults()
	l.own = newOwnSockets(l.t.FDs)
	return l
}

// list is one look: from sock_diag while it answers, else from the tables.
func (l *lister) list() ([]wire.Port, error) {
	out, err := []wire.Port(nil), error(nil)
	if l.diag != nil {
		if out, err = l.diag(l.own); err != nil {
			l.diag = nil // not asked again: this kernel or runtime (gVisor) does not answer
		}
	}
	if l.diag == nil {
		if out, err = listening(l.t, l.own); err != nil {
			return nil, err
		}
	}
	l.own.forgetUnasked()
	slices.SortFunc(out, func(a, b wire.Port) int { return a.Port - b.Port })
	return out, nil
}

// listening reads the tables, with own telling the agent's sockets apart.
func listening(t Tables, own *ownSockets) ([]wire.Port, error) {
	seen := map[int]bool{}
	var out []wire.Port
	for _, path := range []string{t.TCP4, t.TCP6} {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, fmt.Errorf("read listening ports: %w", err)
		}
		ports, err := parseTable(bufio.NewScanner(f), own)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("read listening ports from %s: %w", path, err)
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

// parseTable reads one /proc/net/tcp{,6} table: the listening sockets on
// a loopback or unspecified address whose inode is not one of own's.
func parseTable(sc *bufio.Scanner, own *ownSockets) ([]wire.Port, error) {
	var out []wire.Port
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen {
			continue
		}
		addr, port, err := parseAddr(fields[1])
		if err != nil {
			return nil, err
		}
		if (!addr.IsLoopback() && !addr.IsUnspecified()) || own.has(fields[9]) {
			continue
		}
		out = append(out, wire.Port{Port: port, Address: addr.String()})
	}
	return out, sc.Err()
}

// parseAddr decodes a local_address column: hex address (32-bit words in
// host order, little-endian here) and hex port.
func parseAddr(s string) (netip.Addr, int, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("bad port in %q", s)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each word is little-endian
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr.Unmap(), int(port), nil
}

// ownSockets tells whether a socket (by inode) is one of the agent
// process's own. It reads the process's descriptors (Tables.FDs) only
// when asked about an inode it has no answer for: a socket keeps its
// inode and its owner while it lives, so while nothing new listens a
// look reads no descriptors (Watch keeps one ownSockets across looks).
type ownSockets struct {
	dir   string
	known map[string]bool // inode → whether it is ours
	asked map[string]bool // the inodes asked about since the last forgetUnasked
}

func newOwnSockets(dir string) *ownSockets {
	return &ownSockets{dir: dir, known: map[string]bool{}, asked: map[string]bool{}}
}

// has reports whether the socket with inode is the agent's own.
func (o *ownSockets) has(inode string) bool {
	o.asked[inode] = true
	if ours, ok := o.known[inode]; ok {
		return ours
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return false // not remembered: asked again next time
	}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(o.dir, e.Name()))
		if err != nil {
			continue
		}
		if in, ok := strings.CutPrefix(link, "socket:["); ok {
			o.known[strings.TrimSuffix(in, "]")] = true
		}
	}
	if _, ok := o.known[inode]; !ok {
		o.known[inode] = false
	}
	return o.known[inode]
}

// forgetUnasked drops the answers for sockets not asked about since the
// last call, so that only the sockets that still listen are remembered.
func (o *ownSockets) forgetUnasked() {
	for in := range o.known {
		if !o.asked[in] {
			delete(o.known, in)
		}
	}
	clear(o.asked)
}

// Watch looks at what listens every interval and calls changed with the
// new list whenever it differs from the last one (the first time only
// when something listens). It returns when ctx ends; a table it cannot
// read is skipped for that round.
func Watch(ctx context.Context, t Tables, interval time.Duration, changed func([]wire.Port)) {
	l := newLister(t)
	var last []wire.Port
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if now, err := l.list(); err == nil && !slices.Equal(now, last) {
			last = now
			changed(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
