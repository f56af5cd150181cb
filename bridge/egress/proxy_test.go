package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/egress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveProxy serves a proxy for rules on a unix socket and returns a dialer
// for it and the decisions it reports.
func serveProxy(t *testing.T, rules ...string) (func() net.Conn, func() []egress.Decision) {
	t.Helper()
	rs, err := egress.ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []egress.Decision
	p := egress.New(egress.Config{Rules: rs, Logger: slog.New(slog.DiscardHandler), OnDecision: func(d egress.Decision) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}})
	sock, _ := serveUnix(t, p)
	dial := func() net.Conn {
		c, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
	return dial, func() []egress.Decision { mu.Lock(); defer mu.Unlock(); return append([]egress.Decision(nil), got...) }
}

// serveUnix serves p on a unix socket of its own and returns the socket's
// path and the listener; the test's end closes the listener (an error
// fails the test) and removes the socket's folder.
func serveUnix(t *testing.T, p *egress.Proxy) (string, *egress.Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", "egr") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "e.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Serve(ln)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return sock, l
}

func TestProxy(t *testing.T) {
	t.Parallel()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "allowed %s %s", r.Method, r.URL.Path)
	}))
	defer allowed.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("denied server reached: %s", r.URL)
	}))
	defer denied.Close()
	aPort := allowed.Listener.Addr().(*net.TCPAddr).Port
	dPort := denied.Listener.Addr().(*net.TCPAddr).Port
	aHost := allowed.Listener.Addr().String()

	tests := []struct {
		name    string
		request string // what the sandbox sends; CONNECT ones then GET /x through the tunnel
		status  int
		body    string
		allowed bool
		invalid bool // refused before a rule was asked (Decision.Invalid)
	}{
		{"connect allowed", "CONNECT " + aHost + " HTTP/1.1\r\nHost: " + aHost + "\r\n\r\n", 200, "allowed GET /x", true, false},
		{"plain allowed", "GET http://" + aHost + "/p HTTP/1.1\r\nHost: " + aHost + "\r\n\r\n", 200, "allowed GET /p", true, false},
		{"connect denied port", fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n", dPort), 403, "no egress rule allows", false, false},
		{"plain denied", fmt.Sprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", dPort), 403, "no egress rule", false, false},
		{"name to loopback", fmt.Sprintf("CONNECT localhost:%d HTTP/1.1\r\nHost: x\r\n\r\n", aPort), 502, "not a public address", true, false},
		{"userinfo", fmt.Sprintf("GET http://%s@127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", aHost, dPort), 403, "user info", false, true},
		{"https plain", "GET https://" + aHost + "/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, "absolute http", false, true},
		{"origin form", "GET / HTTP/1.1\r\nHost: " + aHost + "\r\n\r\n", 403, "absolute http", false, true},
		{"decimal ip", fmt.Sprintf("CONNECT 2130706433:%d HTTP/1.1\r\nHost: x\r\n\r\n", aPort), 403, "numeric", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dial, decisions := serveProxy(t, aHost, fmt.Sprintf("localhost:%d", aPort))
			c := dial()
			br := bufio.NewReader(c)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.request, "CONNECT") && resp.StatusCode == 200 {
				if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+aHost+"\r\nConnection: close\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.body)
			}
			ds := decisions()
			if len(ds) != 1 || ds[0].Allowed != tc.allowed || ds[0].Invalid != tc.invalid {
				t.Fatalf("decisions %+v, want one with allowed=%v invalid=%v", ds, tc.allowed, tc.invalid)
			}
		})
	}
}

// TestNameResolvingToLoopbackRefused: a rule naming a host that resolves to
// loopback does not open the host's own services.
func TestNameResolvingToLoopbackRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dial, _ := serveProxy(t, fmt.Sprintf("localhost:%d", port))
	c := dial()
	fmt.Fprintf(c, "CONNECT localhost:%d HTTP/1.1\r\nHost: x\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "not a public address") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// TestCloseCutsTunnels: closing the listener ends a live tunnel.
func TestCloseCutsTunnels(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	rs, _ := egress.ParseRules([]string{ln.Addr().String()})
	p := egress.New(egress.Config{Rules: rs, Logger: slog.New(slog.DiscardHandler)})
	sock, l := serveUnix(t, p)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", ln.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect: %v %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("tunnel still open after Close")
	}
}
