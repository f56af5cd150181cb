package relay_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/boxwire/boxwire/agent/relay"
	"github.com/boxwire/boxwire/bridge/wire"
)

const wait = 10 * time.Second

// echoServer listens on path and answers each line with "echo: " + line.
func echoServer(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := io.WriteString(c, "echo: "+sc.Text()+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// errStillRuns is a relay that did not end in time.
var errStillRuns = errors.New("relay did not end")

// startRelay runs a relay over a pipe and returns the bridge's end of the
// session and a wait for the relay's result.
func startRelay(t *testing.T, cfg relay.Config) (*yamux.Session, func() error) {
	t.Helper()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx, b, cfg) }()
	ycfg := yamux.DefaultConfig()
	ycfg.LogOutput = io.Discard
	sess, err := yamux.Client(a, ycfg)
	if err != nil {
		t.Fatal(err)
	}
	result := sync.OnceValue(func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(wait):
			return errStillRuns
		}
	})
	t.Cleanup(func() {
		cancel()
		sess.Close()
		if errors.Is(result(), errStillRuns) {
			t.Error(errStillRuns)
		}
	})
	return sess, result
}

func roundTrip(t *testing.T, c io.ReadWriter, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return strings.TrimSpace(got)
}

func TestRelayCarriesBothWays(t *testing.T) {
	dir := t.TempDir()
	agentSock := filepath.Join(dir, "agent.sock")
	echoServer(t, agentSock)
	llmSock := filepath.Join(dir, "llm.sock")
	sess, _ := startRelay(t, relay.Config{
		Serve: []string{llmSock},
		Dial:  map[string]string{"agent.sock": agentSock},
	})

	// Bridge → sandbox: a stream named agent.sock reaches the agent.
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteRelayName(st, "agent.sock"); err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, st, "hello"); got != "echo: hello" {
		t.Errorf("through the relay to the agent: %q", got)
	}
	st.Close()

	// Sandbox → bridge: a connection to llm.sock arrives as a stream named
	// llm.sock.
	var c net.Conn
	deadline := time.Now().Add(wait)
	for {
		if c, err = net.Dial("unix", llmSock); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial the relay's llm.sock: %v", err)
	}
	defer c.Close()
	in, err := sess.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	name, err := wire.ReadRelayName(in)
	if err != nil || name != "llm.sock" {
		t.Fatalf("stream opened with %q, %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			io.WriteString(in, "proxy: "+sc.Text()+"\n")
		}
	}()
	if got := roundTrip(t, c, "GET /v1/models"); got != "proxy: GET /v1/models" {
		t.Errorf("through the relay to the bridge: %q", got)
	}
}

func TestRelayRefusesUnknownSocket(t *testing.T) {
	dir := t.TempDir()
	agentSock := filepath.Join(dir, "agent.sock")
	echoServer(t, agentSock)
	sess, _ := startRelay(t, relay.Config{Dial: map[string]string{"agent.sock": agentSock}})
	for _, name := range []string{"other.sock", "../agent.sock"} {
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(st, name+"\n")
		st.SetReadDeadline(time.Now().Add(wait))
		if n, err := st.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("stream for %q: read %d bytes, %v; want EOF (refused)", name, n, err)
		}
		st.Close()
	}
}

func TestRelayEndsWithSessionAndRemovesSockets(t *testing.T) {
	dir := t.TempDir()
	llmSock := filepath.Join(dir, "llm.sock")
	// A stale socket from an earlier relay is replaced.
	old, err := net.Listen("unix", llmSock)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	sess, done := startRelay(t, relay.Config{Serve: []string{llmSock}})
	if _, err := sess.Ping(); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	if err := done(); err != nil {
		t.Fatalf("relay ended with %v, want nil", err)
	}
	if _, err := os.Lstat(llmSock); !os.IsNotExist(err) {
		t.Errorf("llm.sock left behind: %v", err)
	}
}

func TestRelayRefusesNonSocketInItsPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llm.sock")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	err := relay.Run(context.Background(), b, relay.Config{Serve: []string{path}})
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Run with a file at its socket: %v", err)
	}
}
