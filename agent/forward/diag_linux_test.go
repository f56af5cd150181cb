package forward

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/boxwire/boxwire/bridge/wire"
)

// listenOn starts a TCP listener on addr (port 0) and returns its port;
// ok is false when the host has no such address (no IPv6).
func listenOn(t *testing.T, addr string) (port int, ok bool) {
	t.Helper()
	network := "tcp4" // 0.0.0.0 as "tcp" would be a dual-stack [::]
	if net.ParseIP(addr).To4() == nil {
		network = "tcp6"
	}
	l, err := net.Listen(network, net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, false
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, true
}

// The kernel's answer over sock_diag names the test's listeners on the
// loopback (IPv4, IPv6) and on every address, not a connected socket,
// and not the process's own sockets when it is asked to leave them out;
// the tables' answer agrees on those sockets.
func TestListeningDiag(t *testing.T) {
	want := map[int]string{}
	for _, addr := range []string{"127.0.0.1", "::1", "0.0.0.0"} {
		if port, ok := listenOn(t, addr); ok {
			want[port] = addr
		} else if addr != "::1" {
			t.Fatalf("listen on %s failed", addr)
		}
	}
	var v4Port int // a connected socket beside them: dial the 127.0.0.1 one (not ::1's port)
	for p, addr := range want {
		if addr == "127.0.0.1" {
			v4Port = p
		}
	}
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(v4Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := conn.LocalAddr().(*net.TCPAddr).Port

	ours := func(ports []wire.Port) map[int]string {
		got := map[int]string{}
		for _, p := range ports {
			if _, mine := want[p.Port]; mine || p.Port == client {
				got[p.Port] = p.Address
			}
		}
		return got
	}
	diag, err := listeningDiag(newOwnSockets(t.TempDir())) // no descriptors: every socket counts
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Skipf("this kernel does not answer sock_diag (the agent reads the tables): %v", err)
	}
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	if got := ours(diag); !equal(got, want) {
		t.Errorf("sock_diag named %v of the test's sockets, want %v", got, want)
	}
	tables, err := Listening(Tables{TCP4: "/proc/net/tcp", TCP6: "/proc/net/tcp6", FDs: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := ours(tables); !equal(got, want) {
		t.Errorf("the tables named %v of the test's sockets, want %v", got, want)
	}
	self, err := listeningDiag(newOwnSockets("/proc/self/fd"))
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	if got := ours(self); len(got) > 0 {
		t.Errorf("sock_diag named the process's own sockets %v", got)
	}
	// Listening with no tables named asks sock_diag; its answer is sorted.
	def, err := Listening(Tables{FDs: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := ours(def); !equal(got, want) || !slices.IsSortedFunc(def, func(a, b wire.Port) int { return a.Port - b.Port }) {
		t.Errorf("Listening named %v of the test's sockets (want %v), sorted %v", got, want, def)
	}
}

func equal(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A kernel or sandbox runtime that does not answer sock_diag (gVisor:
// "protocol not supported") leaves the lister on the tables: the look
// that failed and every later one read them, and the kernel is not asked
// again.
func TestListerFallsBackToTheTables(t *testing.T) {
	dir := t.TempDir()
	tcp := filepath.Join(dir, "tcp")
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2001 1 0000000000000000 100 0 0 10 0\n"
	if err := os.WriteFile(tcp, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLister(Tables{FDs: dir})
	if l.diag == nil {
		t.Fatal("no tables named, but the lister does not ask sock_diag first")
	}
	l.t.TCP4, l.t.TCP6 = tcp, filepath.Join(dir, "none") // as if /proc/net/tcp held this
	asked := 0
	l.diag = func(*ownSockets) ([]wire.Port, error) {
		asked++
		return nil, unix.EPROTONOSUPPORT
	}
	for range 3 {
		got, err := l.list()
		if err != nil || !slices.Equal(got, []wire.Port{{Port: 8000, Address: "127.0.0.1"}}) {
			t.Fatalf("list = %v, %v; want port 8000 from the table", got, err)
		}
	}
	if asked != 1 {
		t.Errorf("sock_diag asked %d times, want once", asked)
	}
}
