package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// clientBin is the real client binary, built once by clientBinary.
var (
	clientOnce sync.Once
	clientBin  string
	clientErr  error
)

// clientBinary builds client (with -race) into a temporary folder once.
func clientBinary(t *testing.T) string {
	t.Helper()
	clientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "boxwire-e2e-client")
		if err != nil {
			clientErr = err
			return
		}
		clientBin = filepath.Join(dir, "client")
		out, err := exec.Command("go", "build", "-race", "-o", clientBin, "github.com/boxwire/boxwire/client").CombinedOutput()
		if err != nil {
			clientErr = errors.New(string(out))
		}
	})
	if clientErr != nil {
		t.Fatalf("build client: %v", clientErr)
	}
	return clientBin
}

// clientEnv is the environment the client binary runs with: no config
// file, the bridge's token, no color.
func (e *env) clientEnv() []string {
	return append(os.Environ(), "BOXWIRE_TOKEN="+e.token, "BOXWIRE_CONFIG=", "XDG_CONFIG_HOME="+e.t.TempDir(), "NO_COLOR=1")
}

// runClient runs the client binary to completion (bounded by turnTimeout)
// and returns stdout, stderr and the exit code.
func (e *env) runClient(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*turnTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, clientBinary(e.t), args...)
	cmd.Env = e.clientEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		e.t.Fatalf("run client %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ptyClient is the client binary on a pseudo-terminal.
type ptyClient struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	done chan struct{} // closed when the reader saw EOF and the process exited

	mu  sync.Mutex
	out bytes.Buffer // everything the client wrote
	pos int          // how far expect has consumed out
}

// startPTY runs the client binary on a new pseudo-terminal (80x24).
func (e *env) startPTY(args ...string) *ptyClient {
	e.t.Helper()
	return e.startPTYEnv(e.clientEnv(), args...)
}

// startPTYEnv is startPTY with the client's environment given.
func (e *env) startPTYEnv(environ []string, args ...string) *ptyClient {
	e.t.Helper()
	cmd := exec.Command(clientBinary(e.t), args...)
	cmd.Env = environ
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		e.t.Fatalf("start client on a pty: %v", err)
	}
	p := &ptyClient{t: e.t, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil { // EIO once the client exits
				break
			}
		}
		_ = cmd.Wait()
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(eventTimeout):
			e.t.Error("client on the pty did not exit")
		}
		tty.Close()
		if e.t.Failed() {
			e.t.Logf("client screen:\n%s", p.screen())
		}
	})
	return p
}

func (p *ptyClient) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// expect waits until the output after the last match contains want and
// consumes it; it fails the test after timeout.
func (p *ptyClient) expect(want string, timeout time.Duration) {
	p.t.Helper()
	testutil.Until(p.t, fmt.Sprintf("%q on the client's screen", want), timeout, func() error {
		p.mu.Lock()
		i := strings.Index(p.out.String()[p.pos:], want)
		if i >= 0 {
			p.pos += i + len(want)
		}
		p.mu.Unlock()
		if i < 0 {
			return fmt.Errorf("after the last match:\n%s", p.screen()[p.pos:])
		}
		return nil
	})
}

// send types s on the terminal.
func (p *ptyClient) send(s string) {
	p.t.Helper()
	if _, err := p.tty.WriteString(s); err != nil {
		p.t.Fatalf("type %q: %v", s, err)
	}
}

// wait waits for the client to exit and returns its exit code.
func (p *ptyClient) wait(timeout time.Duration) int {
	p.t.Helper()
	testutil.RequireClosed(p.t, "the client's exit", p.done, timeout)
	return p.cmd.ProcessState.ExitCode()
}

// cutProxy is a loopback TCP proxy to target whose live connections the
// test can sever while it keeps accepting new ones.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
	cuts  int
}

// startProxy listens on loopback and forwards to target (host:port).
func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		var d net.Dialer
		up, err := d.DialContext(ctx, "tcp", p.target)
		cancel()
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close(); c.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); up.Close(); c.Close() })
	}
}

// cut closes every live connection through the proxy.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.cuts++
}

// jsonLines parses the client's --json output.
func jsonLines(t *testing.T, out string) []wire.Envelope {
	t.Helper()
	var envs []wire.Envelope
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		env, err := wire.Parse([]byte(line))
		if err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		envs = append(envs, env)
	}
	return envs
}

// colorEnv is clientEnv with colors on (a real terminal's TERM) and the
// config folder (where the history lives) at dir.
func (e *env) colorEnv(dir string) []string {
	var out []string
	for _, kv := range e.clientEnv() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "TERM=") {
			out = append(out, kv)
		}
	}
	return append(out, "XDG_CONFIG_HOME="+dir, "TERM=xterm-256color")
}

// sameFile reports whether two local files have the same bytes.
func sameFile(a, b string) bool {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// expectApprovalID waits for the chat's "approval needed [ID]" line and
// returns ID.
func (p *ptyClient) expectApprovalID(timeout time.Duration) string {
	p.t.Helper()
	const mark = "approval needed ["
	p.expect(mark, timeout)
	deadline := time.Now().Add(eventTimeout)
	for {
		p.mu.Lock()
		rest := p.out.String()[p.pos:]
		id, _, ok := strings.Cut(rest, "]")
		if ok {
			p.pos += len(id) + 1
		}
		p.mu.Unlock()
		if ok {
			if !strings.HasPrefix(id, "ap_") {
				p.t.Fatalf("approval id %q", id)
			}
			return id
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no ] after %q:\n%s", mark, rest)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
