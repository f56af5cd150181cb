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
	// TCP4 and TCP6 default to /proc/net/tcp and /proc/net/tcp6.
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
	t = t.withDefaults()
	own := ownSockets(t.FDs)
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
	slices.SortFunc(out, func(a, b wire.Port) int { return a.Port - b.Port })
	return out, nil
}

// parseTable reads one /proc/net/tcp{,6} table: the listening sockets on
// a loopback or unspecified address whose inode is not in own.
func parseTable(sc *bufio.Scanner, own map[string]bool) ([]wire.Port, error) {
	var out []wire.Port
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen || own[fields[9]] {
			continue
		}
		addr, port, err := parseAddr(fields[1])
		if err != nil {
			return nil, err
		}
		if !addr.IsLoopback() && !addr.IsUnspecified() {
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

// ownSockets returns the inodes of the sockets the process has open.
func ownSockets(dir string) map[string]bool {
	own := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return own
	}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			own[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return own
}

// Watch looks at what listens every interval and calls changed with the
// new list whenever it differs from the last one (the first time only
// when something listens). It returns when ctx ends; a table it cannot
// read is skipped for that round.
func Watch(ctx context.Context, t Tables, interval time.Duration, changed func([]wire.Port)) {
	var last []wire.Port
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if now, err := Listening(t); err == nil && !slices.Equal(now, last) {
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
