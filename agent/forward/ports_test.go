package forward_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/bridge/wire"
)

const tcp4 = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1001 1 0000000000000000 100 0 0 10 0
   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1003 1 0000000000000000 100 0 0 10 0
   3: 0100007F:1F40 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 1004 1 0000000000000000 100 0 0 10 0
   4: 0A00000A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1005 1 0000000000000000 100 0 0 10 0
`

const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1435 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2001 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2002 1 0000000000000000 100 0 0 10 0
`

// TestListening: listening sockets on the loopback or every address count,
// once per port; connections, other addresses and the agent's own
// sockets do not.
func TestListening(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fds := filepath.Join(dir, "fd")
	if err := os.Mkdir(fds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[1003]", filepath.Join(fds, "7")); err != nil { // the agent's own: 3128
		t.Fatal(err)
	}
	got, err := forward.Listening(forward.Tables{TCP4: write("tcp", tcp4), TCP6: write("tcp6", tcp6), FDs: fds})
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.Port{{Port: 3000, Address: "0.0.0.0"}, {Port: 5173, Address: "::1"}, {Port: 8000, Address: "127.0.0.1"}}
	if len(got) != len(want) {
		t.Fatalf("Listening = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Listening = %+v, want %+v", got, want)
		}
	}
	if _, err := forward.Listening(forward.Tables{TCP4: write("bad", "header\n 0: zz:1F40 0:0 0A a b c d e 1 f\n"), TCP6: filepath.Join(dir, "none"), FDs: fds}); err == nil {
		t.Fatal("a table with a bad address was read without an error")
	}
}

// TestWatchRemembersOwnSockets: Watch reads the agent's descriptors only
// for a socket it has not seen, so a look while nothing new listens costs
// two small table reads. Here the descriptors go away after the first
// look: the agent's own listener (3128) must stay left out from memory,
// and a new listener (9000) is still reported.
func TestWatchRemembersOwnSockets(t *testing.T) {
	dir := t.TempDir()
	tcp, tcp6p, fds := filepath.Join(dir, "tcp"), filepath.Join(dir, "tcp6"), filepath.Join(dir, "fd")
	for _, f := range []struct{ path, text string }{{tcp, tcp4}, {tcp6p, tcp6}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(fds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[1003]", filepath.Join(fds, "7")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan []wire.Port, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		forward.Watch(ctx, forward.Tables{TCP4: tcp, TCP6: tcp6p, FDs: fds}, 10*time.Millisecond, func(p []wire.Port) { reports <- p })
	}()
	defer func() { cancel(); <-done }()
	next := func() []int {
		t.Helper()
		select {
		case p := <-reports:
			var ports []int
			for _, x := range p {
				ports = append(ports, x.Port)
			}
			return ports
		case <-time.After(10 * time.Second):
			t.Fatal("no ports report in 10s")
			return nil
		}
	}
	if got := next(); !slices.Equal(got, []int{3000, 5173, 8000}) {
		t.Fatalf("first report %v, want [3000 5173 8000]", got)
	}
	if err := os.RemoveAll(fds); err != nil {
		t.Fatal(err)
	}
	added := tcp4 + "   5: 0100007F:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1006 1 0000000000000000 100 0 0 10 0\n"
	if err := os.WriteFile(tcp+".new", []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tcp+".new", tcp); err != nil {
		t.Fatal(err)
	}
	if got := next(); !slices.Equal(got, []int{3000, 5173, 8000, 9000}) {
		t.Fatalf("after a new listener: %v, want [3000 5173 8000 9000] (3128 is the agent's own)", got)
	}
}
