package e2e_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// pushServer is a loopback HTTP or HTTPS server standing in for a git or
// API host: it records every request and answers "pushed PATH".
type pushServer struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []pushReq
}

// pushReq is one request a pushServer received.
type pushReq struct {
	path, auth string
	at         time.Time
}

func newPushServer(t *testing.T, tlsOn bool) *pushServer {
	t.Helper()
	p := &pushServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, pushReq{path: r.URL.Path, auth: r.Header.Get("Authorization"), at: time.Now()})
		p.mu.Unlock()
		fmt.Fprintf(w, "pushed %s\n", r.URL.Path)
	})
	if tlsOn {
		p.srv = httptest.NewTLSServer(h)
	} else {
		p.srv = httptest.NewServer(h)
	}
	t.Cleanup(p.srv.Close)
	return p
}

// hostPort is "127.0.0.1:PORT".
func (p *pushServer) hostPort() string { return p.srv.Listener.Addr().String() }

// got returns the requests to path so far.
func (p *pushServer) got(path string) []pushReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pushReq
	for _, r := range p.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// writeCA writes the TLS server's certificate as a PEM file (the bridge's
// BOXWIRE_EGRESS_ROOTS) and returns its path.
func (p *pushServer) writeCA(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "roots.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proxyPost is a Python program (the image has no curl) that POSTs to
// argv[1] through the sandbox's egress proxy on its own loopback and prints
// the answer and its status. TLS is verified with the default store,
// which SSL_CERT_FILE (set by the agent) points at.
const proxyPost = `import sys, urllib.request as u
p = "http://127.0.0.1:3128"
o = u.build_opener(u.ProxyHandler({"http": p, "https": p}))
try:
    r = o.open(u.Request(sys.argv[1], data=b"data"), timeout=120)
    print(r.read().decode().strip(), "status=%d" % r.status)
except u.HTTPError as e:
    print(e.read().decode().strip(), "status=%d" % e.code)
`

// viaProxy is a shell command that POSTs to url through the sandbox's
// egress proxy (NO_PROXY would send loopback URLs past it).
func viaProxy(url string) string {
	return fmt.Sprintf("env -u NO_PROXY -u no_proxy python3 -c '%s' %s", proxyPost, url)
}

// answerFunc decides an approval request: TypeApprove, TypeDeny, or ""
// to leave it unanswered.
type answerFunc func(req wire.ApprovalRequest) wire.Type

// turnAnswering sends text and collects every event until the turn's
// turn_done (approval events carry no request id, so chat.Conn.Run would
// skip them), answering each approval_request with answer.
func (s *session) turnAnswering(text string, answer answerFunc) []wire.Envelope {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	id, err := s.conn.SendMessage(ctx, text)
	if err != nil {
		s.t.Fatalf("send %q: %v", text, err)
	}
	var events []wire.Envelope
	for {
		var env wire.Envelope
		var ok bool
		select {
		case env, ok = <-s.conn.Events():
		case <-ctx.Done():
			s.t.Fatalf("turn %q: no turn_done within %v (%d events)", text, turnTimeout, len(events))
		}
		if !ok {
			s.t.Fatalf("turn %q: connection ended: %v", text, s.conn.Err())
		}
		events = append(events, env)
		switch {
		case env.Type == wire.TypeApprovalRequest:
			var req wire.ApprovalRequest
			if err := env.Decode(&req); err != nil {
				s.t.Fatalf("decode approval_request: %v", err)
			}
			if typ := answer(req); typ != "" {
				ans := wire.MustNew(typ, s.conn.Thread(), "ans-"+req.ApprovalID, wire.ApprovalAnswer{ApprovalID: req.ApprovalID, Reason: "e2e says so"})
				if err := s.conn.Send(ctx, ans); err != nil {
					s.t.Fatalf("send %s: %v", typ, err)
				}
			}
		case env.Type == wire.TypeTurnDone && env.ID == id:
			return events
		}
	}
}

// ofType decodes the payloads of the events of type typ into T values.
func ofType[T any](t *testing.T, events []wire.Envelope, typ wire.Type) []T {
	t.Helper()
	var out []T
	for _, env := range events {
		if env.Type != typ {
			continue
		}
		var v T
		if err := env.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		out = append(out, v)
	}
	return out
}

// toolText is every tool_output chunk and tool_result output and error
// of events, joined.
func toolText(t *testing.T, events []wire.Envelope) string {
	t.Helper()
	var b strings.Builder
	for _, o := range ofType[wire.ToolOutput](t, events, wire.TypeToolOutput) {
		b.WriteString(o.Output)
	}
	for _, r := range ofType[wire.ToolResult](t, events, wire.TypeToolResult) {
		b.WriteString("\n" + r.Output + "\n" + r.Error)
	}
	return b.String()
}

// sandboxHolds reports where, in the sandbox of thread, secret occurs:
// its files (all but /proc, /sys and /dev, searched as root) and the
// environment of every process in it (read from the host's /proc: root in
// the sandbox has no capabilities, so cannot read other users' environ).
// The secret is passed as an argument, so it is only in the searching
// process's command line, which is not searched.
func (e *env) sandboxHolds(thread, secret string) string {
	e.t.Helper()
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		e.t.Fatalf("want 1 sandbox for thread %s, have %d", thread, len(boxes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*turnTimeout)
	defer cancel()
	const script = `grep -rIlF -e "$1" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; true`
	out, err := exec.CommandContext(ctx, "docker", "exec", "-u", "0", boxes[0].ID, "sh", "-c", script, "sh", secret).CombinedOutput()
	if err != nil {
		e.t.Fatalf("search sandbox files: %v\n%s", err, out)
	}
	where := strings.Fields(string(out))
	pids, err := exec.CommandContext(ctx, "docker", "top", boxes[0].ID, "-eo", "pid").Output()
	if err != nil {
		e.t.Fatalf("list sandbox processes: %v", err)
	}
	n := 0
	for _, pid := range strings.Fields(string(pids))[1:] { // after the PID header
		data, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			continue // exited since
		}
		n++
		if strings.Contains(string(data), secret) {
			where = append(where, "environ of host pid "+pid)
		}
	}
	if n == 0 {
		e.t.Fatalf("read no process environment of sandbox %s", boxes[0].ID)
	}
	return strings.Join(where, "\n")
}
