package session_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/agent/session"
)

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // leaves the socket file behind, as a crash would

	ln, err := session.Listen("unix:" + path)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != session.SocketMode || ln.Addr().Network() != "unix" {
		t.Fatalf("mode %v network %s", fi.Mode().Perm(), ln.Addr().Network())
	}

	tcp, err := session.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	if n := tcp.Addr().Network(); n != "tcp" {
		t.Fatalf("listener on a host:port is %s, want tcp", n)
	}
}

func TestListenRefusesNonSocketFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ln, err := session.Listen("unix:" + path); err == nil {
		ln.Close()
		t.Fatal("listened over a regular file")
	}
	if data, _ := os.ReadFile(path); string(data) != "keep me" {
		t.Fatal("regular file was touched")
	}
}
