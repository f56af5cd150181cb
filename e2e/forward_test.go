package e2e_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// streamServer is a tiny server for the sandbox (python3, standard
// library): /events sends three server-sent events and stays open, /ws
// echoes one WebSocket text message, anything else says hello.
const streamServer = `import base64, hashlib, http.server, socketserver, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: tick %d\n\n" % i); self.wfile.flush(); time.sleep(0.05)
            time.sleep(30)
        elif self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"].encode()
            acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            self.send_response(101)
            self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc.decode())
            self.end_headers(); self.wfile.flush()
            b0, b1 = self.rfile.read(2)
            n = b1 & 127
            mask = self.rfile.read(4)
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(self.rfile.read(n)))
            out = b"echo: " + data
            self.wfile.write(bytes([0x81, len(out)]) + out); self.wfile.flush()
            time.sleep(1)
        else:
            body = b"hello from the stream server"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers(); self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256
S(("127.0.0.1", 8001), H).serve_forever()
`

// The stream server's listen backlog is 256: python's default of 5 makes
// 200 concurrent connections wait for SYN retransmits (seconds), which is
// python's limit, not the preview's.

// forwardScript starts both servers as background jobs and then answers
// quickly (the chat must stay responsive while previews are busy).
func forwardScript() string {
	writeServer, _ := json.Marshal(map[string]any{"path": "streams.py", "content": streamServer})
	return `{"model":"scripted","turns":[
  {"when":"serve","steps":[
    {"content":"Starting servers.","tool_calls":[
      {"id":"w","name":"write_file","arguments":` + string(writeServer) + `},
      {"id":"f","name":"execute","arguments":{"command":"mkdir -p site && echo 'preview works' > site/hello.txt && head -c 1048576 /dev/urandom > site/blob.bin && sha256sum site/blob.bin"}},
      {"id":"h","name":"execute","arguments":{"command":"cd site && exec python3 -m http.server 8000 --bind 127.0.0.1","background":true}},
      {"id":"s","name":"execute","arguments":{"command":"exec python3 streams.py","background":true}}]},
    {"content":"Both servers run."}]},
  {"steps":[{"content":"pong"}]}
]}`
}

// previewGet GETs url from the bridge (Host host when set) with the bearer
// credential (none when empty) and returns the status and body.
func previewGet(t *testing.T, bridge, path, host, credential string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, bridge+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	resp, err := (&http.Client{Timeout: turnTimeout}).Do(req)
	if err != nil {
		t.Fatalf("GET %s (host %q): %v", path, host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// awaitPorts waits for a ports event that names every port in want.
func (s *session) awaitPorts(want ...int) []wire.Port {
	s.t.Helper()
	deadline := time.Now().Add(turnTimeout)
	for time.Now().Before(deadline) {
		ev := s.awaitEvent(wire.TypePorts)
		var p wire.Ports
		mustDecode(s.t, ev, &p)
		if ev.Seq == 0 {
			s.t.Fatalf("a ports event without a seq: %+v", ev)
		}
		missing := slices.ContainsFunc(want, func(port int) bool {
			return !slices.ContainsFunc(p.Ports, func(q wire.Port) bool { return q.Port == port })
		})
		if !missing {
			return p.Ports
		}
	}
	s.t.Fatalf("no ports event named %v", want)
	return nil
}

// TestPreview, on the real engine and image: a turn starts python3's
// http.server and a stream server as background jobs; the ports event
// names both; the path form and the host form serve the file, a 1 MiB
// file arrives intact, server-sent events and a WebSocket pass; another
// user's key and no key are refused; a public link works without
// credentials until revoked; a port nothing listens on (one the host
// listens on) is a 502; 200 concurrent requests complete while a chat
// turn in the thread answers.
func TestPreview(t *testing.T) {
	e := newEnv(t, forwardScript())
	e.startBridge("BOXWIRE_PREVIEW_DOMAIN=preview.localhost")
	e.cleanAtEnd()
	s := e.dial("")
	id := s.conn.Thread()
	events, done := s.turn("serve the site")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	var sum string
	for _, ev := range events {
		var r wire.ToolResult
		if ev.Type == wire.TypeToolResult && ev.Decode(&r) == nil && r.CallID == "f" {
			sum, _, _ = strings.Cut(r.Output, " ")
		}
	}
	s.awaitPorts(8000, 8001)
	b := e.bridge.url
	_, bridgePort, _ := net.SplitHostPort(strings.TrimPrefix(b, "http://"))

	code, body := previewGet(t, b, "/v1/threads/"+id+"/ports/8000/hello.txt", "", e.token)
	if code != http.StatusOK || body != "preview works\n" {
		t.Fatalf("path form: %d %q\nbridge log:\n%s", code, body, e.bridge.logText())
	}
	host := "8000-" + id + ".preview.localhost:" + bridgePort
	if code, body := previewGet(t, b, "/hello.txt", host, e.token); code != http.StatusOK || body != "preview works\n" {
		t.Fatalf("host form: %d %q", code, body)
	}
	if code, body := previewGet(t, b, "/v1/threads/"+id+"/ports/8000/blob.bin", "", e.token); code != http.StatusOK || len(body) != 1<<20 || sha256Hex(body) != sum {
		t.Fatalf("1 MiB download: %d, %d bytes, sha256 %s want %s", code, len(body), sha256Hex(body), sum)
	}

	bob := e.newUser("bob")
	if code, body := previewGet(t, b, "/v1/threads/"+id+"/ports/8000/hello.txt", "", bob); code != http.StatusNotFound || strings.Contains(body, "preview works") {
		t.Fatalf("another user's key: %d %q", code, body)
	}
	if code, _ := previewGet(t, b, "/hello.txt", host, bob); code != http.StatusNotFound {
		t.Fatalf("another user's key, host form: %d", code)
	}
	if code, _ := previewGet(t, b, "/v1/threads/"+id+"/ports/8000/hello.txt", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", code)
	}
	if code, _ := previewGet(t, b, "/hello.txt", host, ""); code != http.StatusUnauthorized {
		t.Fatalf("no key, host form: %d", code)
	}
	// The host listens on the bridge's port; the sandbox does not: the
	// preview reaches only the sandbox's loopback.
	if code, body := previewGet(t, b, "/v1/threads/"+id+"/ports/"+bridgePort+"/healthz", "", e.token); code != http.StatusBadGateway || !strings.Contains(body, "nothing listens on port "+bridgePort) {
		t.Fatalf("a port only the host listens on: %d %s", code, body)
	}

	// A client cannot open streams itself over the chat WebSocket: only
	// the bridge's own routes do, after their checks.
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	_, err := s.conn.Request(ctx, wire.MustNew(wire.TypePortOpen, id, "", wire.PortOpen{Stream: "mine", Port: 8000}))
	var werr wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeNotAllowed {
		t.Fatalf("a client's port_open: %v, want not_allowed", err)
	}

	t.Run("streams", func(t *testing.T) { previewStreams(t, e, id, "8001-"+id+".preview.localhost:"+bridgePort) })
	t.Run("public link", func(t *testing.T) { previewPublic(t, e, id) })
	t.Run("concurrent", func(t *testing.T) { previewConcurrent(t, e, s, id) })
	t.Run("client", func(t *testing.T) { previewClient(t, e, id) })
	t.Run("browser", func(t *testing.T) { previewBrowser(t, e, id, host) })
}

// previewBrowser: a browser session of the bridge (POST /v1/login) reads
// the path form with its cookie, opens the host form through a ticket,
// and loses the host form when it logs out.
func previewBrowser(t *testing.T, e *env, id, host string) {
	client := &http.Client{Timeout: turnTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, hostHeader string, header http.Header, body string) (*http.Response, string) {
		req, _ := http.NewRequest(method, e.bridge.url+path, strings.NewReader(body))
		if hostHeader != "" {
			req.Host = hostHeader
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, string(raw)
	}
	resp, body := send(http.MethodPost, "/v1/login", "", http.Header{"Content-Type": {"application/json"}}, `{"key":"`+e.token+`"}`)
	var login struct{ CSRF string }
	_ = json.Unmarshal([]byte(body), &login)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "boxwire_session" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusOK || session == nil || login.CSRF == "" {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	cookie := http.Header{"Cookie": {session.Name + "=" + session.Value}}
	if resp, body := send(http.MethodGet, "/v1/threads/"+id+"/ports/8000/hello.txt", "", cookie, ""); resp.StatusCode != http.StatusOK || body != "preview works\n" || !strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("path form with the session cookie: %d %q csp %q", resp.StatusCode, body, resp.Header.Get("Content-Security-Policy"))
	}
	resp, _ = send(http.MethodGet, "/v1/threads/"+id+"/open/8000?path=/hello.txt", "", cookie, "")
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || loc.Host != host {
		t.Fatalf("open: %d %q (want host %s)", resp.StatusCode, resp.Header.Get("Location"), host)
	}
	resp, _ = send(http.MethodGet, loc.RequestURI(), loc.Host, nil, "")
	var preview *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "boxwire_preview" {
			preview = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || preview == nil || resp.Header.Get("Location") != "/hello.txt" {
		t.Fatalf("ticket: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	pc := http.Header{"Cookie": {preview.Name + "=" + preview.Value}}
	if resp, body := send(http.MethodGet, "/hello.txt", host, pc, ""); resp.StatusCode != http.StatusOK || body != "preview works\n" {
		t.Fatalf("host form with the preview cookie: %d %q", resp.StatusCode, body)
	}
	if resp, body := send(http.MethodPost, "/v1/logout", "", http.Header{"Cookie": cookie["Cookie"], "X-Boxwire-Csrf": {login.CSRF}}, ""); resp.StatusCode/100 != 2 {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(http.MethodGet, "/hello.txt", host, pc, ""); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "preview works") {
		t.Fatalf("host form after logout: %d %q", resp.StatusCode, body)
	}
}

// previewStreams: server-sent events and a WebSocket through the path and
// host forms.
func previewStreams(t *testing.T, e *env, id, host string) {
	req, _ := http.NewRequest(http.MethodGet, e.bridge.url+"/v1/threads/"+id+"/ports/8001/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var ticks []string
	for len(ticks) < 3 && sc.Scan() { // the server keeps the stream open: these came as sent
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			ticks = append(ticks, line)
		}
	}
	if len(ticks) != 3 || ticks[2] != "data: tick 2" {
		t.Fatalf("events %q (%v)", ticks, sc.Err())
	}
	for _, c := range []struct{ url, host string }{
		{"ws" + strings.TrimPrefix(e.bridge.url, "http") + "/v1/threads/" + id + "/ports/8001/ws", ""},
		{"ws://" + host + "/ws", host},
	} {
		d := websocket.Dialer{HandshakeTimeout: startTimeout}
		if c.host != "" {
			addr := strings.TrimPrefix(e.bridge.url, "http://")
			d.NetDial = func(string, string) (net.Conn, error) { return net.Dial("tcp", addr) }
		}
		ws, _, err := d.Dial(c.url, http.Header{"Authorization": {"Bearer " + e.token}})
		if err != nil {
			t.Fatalf("%s: upgrade: %v", c.url, err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte("reload?")); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(turnTimeout))
		_, data, err := ws.ReadMessage()
		ws.Close()
		if err != nil || string(data) != "echo: reload?" {
			t.Fatalf("%s: echo %q %v", c.url, data, err)
		}
	}
}

// previewPublic: a public link serves without credentials, both forms,
// until it is revoked.
func previewPublic(t *testing.T, e *env, id string) {
	code, raw := e.call(e.token, http.MethodPost, "/v1/threads/"+id+"/public", map[string]int{"port": 8000})
	var link struct {
		Token, URL string
	}
	if code != http.StatusCreated || json.Unmarshal(raw, &link) != nil || link.Token == "" {
		t.Fatalf("make a public link: %d %s", code, raw)
	}
	bob := e.newUser("bob2")
	if code, _ := e.call(bob, http.MethodPost, "/v1/threads/"+id+"/public", map[string]int{"port": 8000}); code != http.StatusNotFound {
		t.Fatalf("another user makes a link to the thread: %d", code)
	}
	if code, body := previewGet(t, e.bridge.url, link.URL+"hello.txt", "", ""); code != http.StatusOK || body != "preview works\n" {
		t.Fatalf("public link: %d %q", code, body)
	}
	if code, _ := e.call(e.token, http.MethodDelete, "/v1/threads/"+id+"/public/8000", nil); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code, body := previewGet(t, e.bridge.url, link.URL+"hello.txt", "", ""); code != http.StatusNotFound || strings.Contains(body, "preview works") {
		t.Fatalf("revoked link: %d %q", code, body)
	}
}

// previewConcurrent: 200 concurrent requests through one preview complete
// while a chat turn in the same thread answers.
func previewConcurrent(t *testing.T, e *env, s *session, id string) {
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	client := &http.Client{Timeout: 2 * turnTimeout}
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/threads/%s/ports/8001/hello?i=%d", e.bridge.url, id, i), nil)
			req.Header.Set("Authorization", "Bearer "+e.token)
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "hello from the stream server" {
				errs <- fmt.Errorf("request %d: %d %q", i, resp.StatusCode, body)
			}
		})
	}
	start := time.Now()
	_, done := s.turn("ping")
	took := time.Since(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn during the requests ended %q", done.Reason)
	}
	t.Logf("a chat turn took %v while %d preview requests ran", took, n)
}

// previewClient: client ports lists the servers; client forward serves
// curl on the host's loopback.
func previewClient(t *testing.T, e *env, id string) {
	out, errOut, code := e.runClient("--url", e.bridge.url, "ports", id)
	if code != 0 || !strings.Contains(out, "8000") || !strings.Contains(out, "8001") || !strings.Contains(out, "preview.localhost") {
		t.Fatalf("client ports: %d\n%s\n%s", code, out, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free local port for the forward
	if err != nil {
		t.Fatal(err)
	}
	local := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(clientBinary(t), "--url", e.bridge.url, "forward", id, "8000:"+strconv.Itoa(local))
	cmd.Env = e.clientEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "forwarding 127.0.0.1:"+strconv.Itoa(local)) {
		t.Fatalf("client forward said %q %v (stderr %s)", line, err, stderr.String())
	}
	for _, path := range []string{"/hello.txt", "/hello.txt"} { // two connections, one after the other
		curl := exec.Command("curl", "-sS", "--max-time", "60", "http://127.0.0.1:"+strconv.Itoa(local)+path)
		got, err := curl.Output()
		if err != nil || string(got) != "preview works\n" {
			t.Fatalf("curl through client forward: %q %v (client stderr %s)", got, err, stderr.String())
		}
	}
	bad := exec.Command(clientBinary(t), "--url", e.bridge.url, "forward", id, "http")
	bad.Env = e.clientEnv()
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), `"http" is not a port`) {
		t.Fatalf("client forward with a bad port: %v %s", err, out)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
