package egress_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/agent/egress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestForwardsToSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "agegr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "egress.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() { // an echo server that upper-cases one line
		c, err := ul.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, strings.ToUpper(line))
	}()
	f, err := egress.Listen("127.0.0.1:0", sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	c, err := net.DialTimeout("tcp", f.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "hello\n")
	got, _ := bufio.NewReader(c).ReadString('\n')
	if got != "HELLO\n" {
		t.Fatalf("got %q", got)
	}
	c.Close()

	// A second connection stays open until Run stops.
	c2, err := net.DialTimeout("tcp", f.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestUnreachableSocket(t *testing.T) {
	f, err := egress.Listen("127.0.0.1:0", "/nonexistent/egress.sock", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	c, err := net.DialTimeout("tcp", f.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "502") {
		t.Fatalf("got %q", b)
	}
}

func TestEnv(t *testing.T) {
	env := strings.Join(egress.Env("127.0.0.1:3128"), " ")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost"} {
		if !strings.Contains(env, want) {
			t.Errorf("%s missing from %s", want, env)
		}
	}
}
