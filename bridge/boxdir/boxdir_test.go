package boxdir_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/testutil"
)

func newLayout(t *testing.T) (*boxdir.Layout, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mounts a tmpfs)")
	}
	root := t.TempDir()
	l := boxdir.New(boxdir.Config{Root: root, UID: 1000, GID: 1000})
	t.Cleanup(func() {
		if ids, _ := l.IDs(); len(ids) > 0 {
			for _, id := range ids {
				_ = l.Remove(id)
			}
		}
	})
	return l, root
}

// TestMakeLayout: the bridge folder is the bridge's (0755), the agent
// folder a capped tmpfs of the sandbox's user; Open accepts it and Remove
// unmounts and deletes both.
func TestMakeLayout(t *testing.T) {
	l, _ := newLayout(t)
	d, err := l.Make("t_1")
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(d.Bridge, &st); err != nil || st.Uid != 0 || st.Mode&0o777 != 0o755 {
		t.Fatalf("bridge folder: uid %d mode %o err %v", st.Uid, st.Mode&0o777, err)
	}
	if err := syscall.Lstat(d.Agent, &st); err != nil || st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o777 != 0o700 {
		t.Fatalf("agent folder: uid %d gid %d mode %o err %v", st.Uid, st.Gid, st.Mode&0o777, err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(d.Agent, &fs); err != nil || fs.Type != 0x01021994 {
		t.Fatalf("agent folder is not a tmpfs (type %x): %v", fs.Type, err)
	}
	if _, err := l.Open("t_1"); err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := l.Remove("t_1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Bridge, d.Agent} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	if err := l.Remove("t_1"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

// TestAgentFolderCapped: what a sandbox writes in its agent folder is
// bounded in bytes and in files (it lands in a small tmpfs, not on the
// host's disk).
func TestAgentFolderCapped(t *testing.T) {
	l, _ := newLayout(t)
	d, err := l.Make("t_cap")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(d.Agent, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var n int64
	for n < 64<<20 {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	f.Close()
	if n > boxdir.DefaultAgentBytes {
		t.Fatalf("wrote %d bytes into the agent folder, cap %d", n, boxdir.DefaultAgentBytes)
	}
	var made int
	for i := range 1000 {
		g, err := os.Create(filepath.Join(d.Agent, "f"+strconv.Itoa(i)))
		if err != nil {
			break
		}
		g.Close()
		made++
	}
	if made >= boxdir.DefaultAgentInodes {
		t.Fatalf("made %d files in the agent folder, cap %d inodes", made, boxdir.DefaultAgentInodes)
	}
}

// TestDialAgentRefusesLinks: the agent folder is the sandbox's, so a link
// (or file) planted under the socket's name is never connected to, even
// when it points at a live host socket; a real socket is.
func TestDialAgentRefusesLinks(t *testing.T) {
	l, root := newLayout(t)
	d, err := l.Make("t_dial")
	if err != nil {
		t.Fatal(err)
	}
	hostSock := filepath.Join(root, "host.sock")
	host, accepted := listenCounting(t, hostSock)
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	sock := filepath.Join(d.Agent, "agent.sock")
	if err := os.Symlink(hostSock, sock); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialAgent(ctx, "agent.sock"); !errors.Is(err, boxdir.ErrNotSocket) {
		t.Fatalf("dial through a link: %v, want ErrNotSocket", err)
	}
	os.Remove(sock)
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialAgent(ctx, "agent.sock"); !errors.Is(err, boxdir.ErrNotSocket) {
		t.Fatalf("dial a file: %v, want ErrNotSocket", err)
	}
	os.Remove(sock)
	agent, agentAccepted := listenCounting(t, sock)
	defer agent.Close()
	c, err := d.DialAgent(ctx, "agent.sock")
	if err != nil {
		t.Fatalf("dial the real socket: %v", err)
	}
	c.Close()
	testutil.Eventually(t, "the real socket accepting the connection", 10*time.Second, func() bool { return agentAccepted() >= 1 })
	if n := accepted(); n != 0 {
		t.Fatalf("the host socket behind the link got %d connections", n)
	}
}

// TestDialAgentRace: a sandbox that keeps swapping a link to a host socket
// in and out under the agent socket's name never gets the bridge to
// connect to the host socket.
func TestDialAgentRace(t *testing.T) {
	l, root := newLayout(t)
	d, err := l.Make("t_race")
	if err != nil {
		t.Fatal(err)
	}
	hostSock := filepath.Join(root, "host.sock")
	host, accepted := listenCounting(t, hostSock)
	defer host.Close()
	real := filepath.Join(d.Agent, "real.sock")
	agent, _ := listenCounting(t, real)
	defer agent.Close()
	link := filepath.Join(d.Agent, "link")
	if err := os.Symlink(hostSock, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(d.Agent, "agent.sock")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the sandbox's side: link in, socket back, over and over
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Link(link, filepath.Join(d.Agent, "l2")) // hard link of the symlink itself
			_ = os.Rename(filepath.Join(d.Agent, "l2"), sock)
			_ = os.Link(real, filepath.Join(d.Agent, "r2"))
			_ = os.Rename(filepath.Join(d.Agent, "r2"), sock)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ok, refused int
	for range 2000 {
		c, err := d.DialAgent(ctx, "agent.sock")
		switch {
		case err == nil:
			ok++
			c.Close()
		case errors.Is(err, boxdir.ErrNotSocket):
			refused++
		}
	}
	close(stop)
	<-done
	if n := accepted(); n != 0 {
		t.Fatalf("the host socket got %d connections (%d dials connected, %d refused)", n, ok, refused)
	}
	t.Logf("%d dials reached the agent's socket, %d met the link and were refused", ok, refused)
}

// TestOpenRefusesOldLayout: folders an older bridge made (one folder the
// sandbox's user owns and writes, no tmpfs) are not adopted.
func TestOpenRefusesOldLayout(t *testing.T) {
	l, root := newLayout(t)
	old := filepath.Join(root, "run", "t_old")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(old, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open("t_old"); err == nil {
		t.Fatal("a sandbox-owned bridge folder was accepted")
	}
	if err := os.Chown(old, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "agent", "t_old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open("t_old"); err == nil {
		t.Fatal("an agent folder that is no tmpfs of its own was accepted")
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../x"} {
		if _, err := l.Make(bad); err == nil {
			t.Errorf("Make(%q) accepted", bad)
		}
	}
}

// TestWriteFileReplacesNotFollows: WriteFile puts a whole new file in
// place; a link or a hard-linked file at the name is replaced, never
// written through.
func TestWriteFileReplacesNotFollows(t *testing.T) {
	l, root := newLayout(t)
	d, err := l.Make("t_w")
	if err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(root, "canary")
	if err := os.WriteFile(canary, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(canary, filepath.Join(d.Bridge, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("ca.pem", []byte("CERT"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d.Bridge, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(canary, filepath.Join(d.Bridge, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("ca.pem", []byte("CERT2"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(canary)
	fi, _ := os.Stat(canary)
	if !bytes.Equal(got, []byte("host secret")) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("canary now %q mode %v", got, fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(d.Bridge, "ca.pem")); string(b) != "CERT2" {
		t.Fatalf("ca.pem %q", b)
	}
	ln, err := d.Listen("llm.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(filepath.Join(d.Bridge, "llm.sock")); err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("llm.sock %v %v", fi, err)
	}
}

// listenCounting listens on a unix socket at path and counts the
// connections it accepts.
func listenCounting(t *testing.T, path string) (net.Listener, func() int) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	n := make(chan int, 1)
	n <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n <- <-n + 1
			c.Close()
		}
	}()
	return ln, func() int { v := <-n; n <- v; return v }
}

// TestPrivateLayout: with Private the agent folder is a plain folder only
// the bridge may enter (no tmpfs, so no root needed); Open accepts it and
// refuses one others may enter; the agent's socket is dialled there;
// Remove and RemoveAll delete it without an unmount.
func TestPrivateLayout(t *testing.T) {
	root := t.TempDir()
	l := boxdir.New(boxdir.Config{Root: root, UID: 1000, GID: 1000, Private: true})
	d, err := l.Make("t_1")
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(d.Agent, &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o777 != 0o700 {
		t.Fatalf("agent folder: uid %d mode %o err %v", st.Uid, st.Mode&0o777, err)
	}
	var parent syscall.Stat_t
	if err := syscall.Lstat(filepath.Dir(d.Agent), &parent); err != nil || parent.Dev != st.Dev {
		t.Fatalf("private agent folder is a mount of its own (%v)", err)
	}
	if _, err := l.Open("t_1"); err != nil {
		t.Fatalf("open: %v", err)
	}
	ln, err := net.Listen("unix", filepath.Join(d.Agent, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialAgent(ctx, "agent.sock")
	if err != nil {
		t.Fatalf("dial the agent socket: %v", err)
	}
	c.Close()
	if err := os.Chmod(d.Agent, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open("t_1"); err == nil {
		t.Fatal("open accepted an agent folder others may enter")
	}
	if err := l.Remove("t_1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Lstat(d.Agent); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("agent folder left: %v", err)
	}
	if _, err := l.Make("t_2"); err != nil {
		t.Fatal(err)
	}
	if err := boxdir.RemoveAll(root); err != nil {
		t.Fatalf("remove all: %v", err)
	}
	if ids, err := l.IDs(); err != nil || len(ids) != 0 {
		t.Fatalf("left %v (%v)", ids, err)
	}
}
