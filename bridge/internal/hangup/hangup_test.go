package hangup_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/internal/hangup"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = testutil.RequireReceive(t, "accept", accepted, 5*time.Second)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestWatch: the context ends when the peer closes, also with data it
// sent still unread (which stays for the reader); it does not end while
// the peer stays.
func TestWatch(t *testing.T) {
	t.Parallel()
	for _, unread := range []bool{false, true} {
		client, server := pair(t)
		ctx, stop := hangup.Watch(context.Background(), server)
		if unread {
			if _, err := client.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("unread %v: ended while the peer is there", unread)
		case <-time.After(100 * time.Millisecond): // several polls
		}
		client.Close()
		testutil.RequireClosed(t, "context after the hang-up", ctx.Done(), 5*time.Second)
		stop()
		if unread {
			buf := make([]byte, 5)
			_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := server.Read(buf); err != nil || string(buf[:n]) != "hello" {
				t.Fatalf("what the peer sent: %q %v", buf[:n], err)
			}
		}
	}
}

// TestWatchStop: stop ends the watch (and its context) without a
// hang-up; a connection that is no socket is watched by the parent only.
func TestWatchStop(t *testing.T) {
	t.Parallel()
	_, server := pair(t)
	ctx, stop := hangup.Watch(context.Background(), server)
	stop()
	testutil.RequireClosed(t, "context after stop", ctx.Done(), 5*time.Second)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop = hangup.Watch(parent, a)
	defer stop()
	b.Close()
	cancel()
	testutil.RequireClosed(t, "pipe context after the parent", ctx.Done(), 5*time.Second)
}
