package preview_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/preview"
	"github.com/boxwire/boxwire/bridge/wire"
)

const waitFor = 20 * time.Second

// backend is a preview.Backend whose "sandbox" ports are TCP servers the
// test starts on the loopback: it records every dial, and dials only
// ports of thread t1.
type backend struct {
	mu     sync.Mutex
	ports  map[int]int // sandbox port -> test server's real port
	dialed []string
}

func (b *backend) DialPort(ctx context.Context, thread string, port int) (net.Conn, error) {
	b.mu.Lock()
	b.dialed = append(b.dialed, fmt.Sprintf("%s:%d", thread, port))
	real, ok := b.ports[port]
	b.mu.Unlock()
	if thread != "t1" {
		return nil, wire.Error{Code: wire.CodeNotFound, Message: "no such thread"}
	}
	if !ok {
		return nil, wire.Error{Code: wire.CodePortClosed, Message: fmt.Sprintf("nothing listens on port %d in the sandbox", port)}
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(real))
}

func (b *backend) Ports(context.Context, string) ([]wire.Port, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []wire.Port
	for p := range b.ports {
		out = append(out, wire.Port{Port: p, Address: "127.0.0.1"})
	}
	return out, nil
}

// sessionValid says the browser session "good" is logged in.
var sessionValid atomic.Bool

// guard lets a request through when it carries "Bearer owner" or the
// browser session "good" while it is valid; the
// server's guard checks the real credentials and ownership.
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session := strings.Contains(r.Header.Get("Cookie"), "boxwire_session=good") && sessionValid.Load()
		if r.Header.Get("Authorization") != "Bearer owner" && !session {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type env struct {
	t       *testing.T
	b       *backend
	bridge  *httptest.Server
	seen    chan *http.Request // what the app saw
	preview *preview.Preview
}

// newEnv starts an "app" (sandbox port 8000) and a bridge serving the
// preview with domain preview.localhost.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, seen: make(chan *http.Request, 64)}
	app := httptest.NewServer(http.HandlerFunc(e.app))
	t.Cleanup(app.Close)
	_, appPort, _ := net.SplitHostPort(app.Listener.Addr().String())
	real, _ := strconv.Atoi(appPort)
	e.b = &backend{ports: map[int]int{8000: real}}
	pv, err := preview.New(preview.Config{Backend: e.b, Domain: "preview.localhost"})
	if err != nil {
		t.Fatal(err)
	}
	e.preview = pv
	mux := http.NewServeMux()
	pv.Routes(mux, guard)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bridge route", http.StatusTeapot) })
	e.bridge = httptest.NewServer(pv.Hosts(mux, guard))
	t.Cleanup(func() { e.bridge.Close(); pv.Close() })
	return e
}

// app is the server in the "sandbox".
func (e *env) app(w http.ResponseWriter, r *http.Request) {
	select {
	case e.seen <- r.Clone(context.Background()):
	default:
	}
	switch r.URL.Path {
	case "/events":
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: tick %d\n\n", i)
			w.(http.Flusher).Flush()
			<-time.After(5 * time.Millisecond)
		}
		<-r.Context().Done() // an SSE stream stays open
	case "/ws":
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			mt, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			_ = ws.WriteMessage(mt, append([]byte("echo: "), data...))
		}
	default:
		w.Header().Add("Set-Cookie", "boxwire_session=planted; Path=/")
		w.Header().Add("Set-Cookie", "app=1; Path=/")
		fmt.Fprintf(w, "app at %s host %s", r.URL.Path, r.Host)
	}
}

func (e *env) get(path, host string, header http.Header) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.bridge.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.bridge.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var owner = http.Header{"Authorization": {"Bearer owner"}}

// TestPathForm: the app gets its own path and host, never the bridge's
// credentials; its pages come sandboxed.
func TestPathForm(t *testing.T) {
	e := newEnv(t)
	h := http.Header{"Authorization": {"Bearer owner"}, "Cookie": {"boxwire_session=SECRET; theme=dark"}, "X-Boxwire-Csrf": {"tok"}}
	resp, body := e.get("/v1/threads/t1/ports/8000/index.html?x=1", "", h)
	if resp.StatusCode != http.StatusOK || body != "app at /index.html host localhost:8000" {
		t.Fatalf("path form: %d %q", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") {
		t.Fatalf("path form CSP %q", csp)
	}
	if set := resp.Header.Values("Set-Cookie"); len(set) != 1 || set[0] != "app=1; Path=/" {
		t.Fatalf("the app's cookies reached the browser as %q: only its own may", set)
	}
	r := <-e.seen
	if r.Header.Get("Authorization") != "" || strings.Contains(r.Header.Get("Cookie"), "SECRET") || r.Header.Get("X-Boxwire-Csrf") != "" {
		t.Fatalf("the app saw the bridge's credentials: %v", r.Header)
	}
	if r.Header.Get("Cookie") != "theme=dark" || r.URL.RawQuery != "x=1" || r.Header.Get("X-Forwarded-Prefix") != "/v1/threads/t1/ports/8000" {
		t.Fatalf("the app's request: cookie %q query %q prefix %q", r.Header.Get("Cookie"), r.URL.RawQuery, r.Header.Get("X-Forwarded-Prefix"))
	}
	if resp, _ := e.get("/v1/threads/t1/ports/8000/", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}
	noRedirect := *e.bridge.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodGet, e.bridge.URL+"/v1/threads/t1/ports/8000", nil)
	req.Header.Set("Authorization", "Bearer owner")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/v1/threads/t1/ports/8000/" {
		t.Fatalf("folder redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestErrors: nothing listening is 502 with a body that says so; a bad
// port is 400; another thread is what the backend says.
func TestErrors(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/threads/t1/ports/9/", http.StatusBadGateway, "nothing listens on port 9"},
		{"/v1/threads/t1/ports/0/", http.StatusBadRequest, "not a number from 1 to 65535"},
		{"/v1/threads/t1/ports/99999/", http.StatusBadRequest, "not a number from 1 to 65535"},
		{"/v1/threads/t1/ports/08000/", http.StatusBadRequest, "not a number"},
		{"/v1/threads/t2/ports/8000/", http.StatusNotFound, "no such thread"},
	}
	for _, c := range cases {
		resp, body := e.get(c.path, "", owner)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) || !strings.Contains(body, `"code"`) {
			t.Errorf("%s: %d %s, want %d saying %q", c.path, resp.StatusCode, body, c.status, c.want)
		}
	}
}

// TestHostForm: {port}-{thread}.{domain} reaches the app at /; other
// hosts are the bridge's.
func TestHostForm(t *testing.T) {
	e := newEnv(t)
	resp, body := e.get("/app.js", "8000-t1.preview.localhost", owner)
	if resp.StatusCode != http.StatusOK || body != "app at /app.js host localhost:8000" {
		t.Fatalf("host form: %d %q", resp.StatusCode, body)
	}
	if resp, _ := e.get("/", "8000-t1.preview.localhost", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("host form without credentials: %d", resp.StatusCode)
	}
	if resp, body := e.get("/", "nonsense.preview.localhost", owner); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not a preview host") {
		t.Fatalf("bad preview host: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.get("/", "a.b.preview.localhost", owner); resp.StatusCode != http.StatusTeapot {
		t.Fatalf("a deeper name is the bridge's: %d", resp.StatusCode)
	}
	if resp, _ := e.get("/", "localhost", owner); resp.StatusCode != http.StatusTeapot {
		t.Fatalf("the bridge's own host: %d", resp.StatusCode)
	}
}

// TestPublicLink: a public link serves without credentials until it is
// revoked, at once; its token is long and random.
func TestPublicLink(t *testing.T) {
	e := newEnv(t)
	post := func(body string, h http.Header) (*http.Response, preview.Public) {
		req, _ := http.NewRequest(http.MethodPost, e.bridge.URL+"/v1/threads/t1/public", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := e.bridge.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p preview.Public
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp, p
	}
	if resp, _ := post(`{"port":8000}`, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("making a link without credentials: %d", resp.StatusCode)
	}
	if resp, _ := post(`{"port":"x"}`, owner); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad body: %d", resp.StatusCode)
	}
	resp, link := post(`{"port":8000}`, owner)
	if resp.StatusCode != http.StatusCreated || len(link.Token) < 26 || link.URL != "/v1/public/"+link.Token+"/" || !strings.HasPrefix(link.HostURL, "http://pub-"+link.Token+".preview.localhost:") {
		t.Fatalf("made %d %+v", resp.StatusCode, link)
	}
	if resp, again := post(`{"port":8000}`, owner); resp.StatusCode != http.StatusOK || again.Token != link.Token {
		t.Fatalf("asked again: %d %+v", resp.StatusCode, again)
	}
	if resp, body := e.get(link.URL+"page", "", nil); resp.StatusCode != http.StatusOK || body != "app at /page host localhost:8000" {
		t.Fatalf("public path form: %d %q", resp.StatusCode, body)
	}
	if resp, body := e.get("/page", "pub-"+link.Token+".preview.localhost", nil); resp.StatusCode != http.StatusOK || body != "app at /page host localhost:8000" {
		t.Fatalf("public host form: %d %q", resp.StatusCode, body)
	}
	resp, body := e.get("/v1/threads/t1/ports", "", owner)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, link.Token) || !strings.Contains(body, `"host_url":"http://8000-t1.preview.localhost:`) {
		t.Fatalf("ports: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, e.bridge.URL+"/v1/threads/t1/public/8000", nil)
	req.Header.Set("Authorization", "Bearer owner")
	if resp, err := e.bridge.Client().Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	for _, try := range []struct{ path, host string }{{link.URL + "page", ""}, {"/page", "pub-" + link.Token + ".preview.localhost"}} {
		if resp, body := e.get(try.path, try.host, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "revoked") {
			t.Fatalf("revoked link %s %s: %d %s", try.host, try.path, resp.StatusCode, body)
		}
	}
	if resp, _ := e.get("/v1/public/"+strings.Repeat("a", 26)+"/", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a guessed token: %d", resp.StatusCode)
	}
}

// TestStreamsThrough: server-sent events arrive as they are sent, and a
// WebSocket upgrade reaches the app and echoes, both forms.
func TestStreamsThrough(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest(http.MethodGet, e.bridge.URL+"/v1/threads/t1/ports/8000/events", nil)
	req.Header.Set("Authorization", "Bearer owner")
	resp, err := e.bridge.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var ticks []string
	for len(ticks) < 3 && sc.Scan() { // the stream stays open: these came before its end
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			ticks = append(ticks, line)
		}
	}
	if len(ticks) != 3 || ticks[2] != "data: tick 2" {
		t.Fatalf("events %q (%v)", ticks, sc.Err())
	}
	for _, c := range []struct{ path, host string }{{"/v1/threads/t1/ports/8000/ws", ""}, {"/ws", "8000-t1.preview.localhost"}} {
		u := "ws" + strings.TrimPrefix(e.bridge.URL, "http") + c.path
		d := websocket.Dialer{HandshakeTimeout: waitFor}
		h := http.Header{"Authorization": {"Bearer owner"}}
		if c.host != "" {
			h.Set("Host", c.host)
			d.NetDial = func(string, string) (net.Conn, error) { return net.Dial("tcp", e.bridge.Listener.Addr().String()) }
			u = "ws://" + c.host + c.path
		}
		ws, _, err := d.Dial(u, h)
		if err != nil {
			t.Fatalf("%s: upgrade: %v", c.path, err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte("live reload?")); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(waitFor))
		_, data, err := ws.ReadMessage()
		if err != nil || string(data) != "echo: live reload?" {
			t.Fatalf("%s: echo %q %v", c.path, data, err)
		}
		ws.Close()
	}
}

// TestNothingDialledOnTheHost: with a proxy in the environment, the
// preview still dials only the backend's streams.
func TestNothingDialledOnTheHost(t *testing.T) {
	var hits atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "trap", http.StatusTeapot)
	}))
	defer trap.Close()
	t.Setenv("HTTP_PROXY", trap.URL)
	t.Setenv("http_proxy", trap.URL)
	e := newEnv(t)
	if resp, body := e.get("/v1/threads/t1/ports/8000/x", "", owner); resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "app at /x") {
		t.Fatalf("through the preview: %d %q", resp.StatusCode, body)
	}
	if hits.Load() != 0 {
		t.Fatalf("the environment's proxy was used %d times", hits.Load())
	}
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	for _, d := range e.b.dialed {
		if d != "t1:8000" {
			t.Fatalf("dialled %q", d)
		}
	}
}

// TestForward: the forward WebSocket carries a TCP connection both ways
// with half-close; a refused port is a 502 before the upgrade; a huge
// message closes with 1009.
func TestForward(t *testing.T) {
	e := newEnv(t)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				data, _ := io.ReadAll(c) // until our half-close
				_, _ = c.Write([]byte(strings.ToUpper(string(data))))
			}()
		}
	}()
	e.b.mu.Lock()
	e.b.ports[7000] = echo.Addr().(*net.TCPAddr).Port
	e.b.mu.Unlock()
	d := websocket.Dialer{HandshakeTimeout: waitFor}
	base := "ws" + strings.TrimPrefix(e.bridge.URL, "http")
	if _, resp, err := d.Dial(base+"/v1/threads/t1/forward/9", owner); err == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a refused port: %v %v", err, resp)
	}
	ws, _, err := d.Dial(base+"/v1/threads/t1/forward/7000", owner)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("shout "))
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("this"))
	_ = ws.WriteMessage(websocket.BinaryMessage, nil) // our end
	var got strings.Builder
	for {
		_ = ws.SetReadDeadline(time.Now().Add(waitFor))
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (got %q)", err, got.String())
		}
		if len(data) == 0 {
			break
		}
		got.Write(data)
	}
	if got.String() != "SHOUT THIS" {
		t.Fatalf("forward answered %q", got.String())
	}
	big, _, err := d.Dial(base+"/v1/threads/t1/forward/7000", owner)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	_ = big.WriteMessage(websocket.BinaryMessage, make([]byte, 2<<20))
	_ = big.SetReadDeadline(time.Now().Add(waitFor))
	for {
		if _, _, err = big.ReadMessage(); err != nil {
			break
		}
	}
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("a 2 MiB message: %v, want close 1009", err)
	}
}

// TestHostFormBrowser: a browser logged in to the bridge opens the host
// form through a one-time ticket; its preview cookie works on that host
// alone, never reaches the app, and stops with the bridge session.
func TestHostFormBrowser(t *testing.T) {
	sessionValid.Store(true)
	e := newEnv(t)
	noRedirect := *e.bridge.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	do := func(method, path, host, cookie string) *http.Response {
		req, _ := http.NewRequest(method, e.bridge.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := do(http.MethodGet, "/v1/threads/t1/open/8000?path=/app.js", "", "boxwire_session=good")
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(loc.Host, "8000-t1.preview.localhost:") || loc.Path != "/.boxwire/ticket" {
		t.Fatalf("open: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := do(http.MethodGet, "/v1/threads/t1/open/8000", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("open without a session: %d", resp.StatusCode)
	}
	if resp := do(http.MethodGet, loc.RequestURI(), "8001-t1.preview.localhost", ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the ticket on another port's host: %d", resp.StatusCode) // and it is spent now
	}
	resp = do(http.MethodGet, "/v1/threads/t1/open/8000?path=/app.js", "", "boxwire_session=good")
	loc, _ = url.Parse(resp.Header.Get("Location"))
	resp = do(http.MethodGet, loc.RequestURI(), loc.Host, "")
	var sid string
	for _, c := range resp.Cookies() {
		if c.Name == "boxwire_preview" && c.HttpOnly && c.SameSite == http.SameSiteLaxMode {
			sid = c.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/app.js" || sid == "" {
		t.Fatalf("ticket: %d %q cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if resp := do(http.MethodGet, loc.RequestURI(), loc.Host, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a ticket used twice: %d", resp.StatusCode)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if resp := do(method, "/app.js", loc.Host, "boxwire_preview="+sid+"; theme=dark"); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with the preview cookie: %d", method, resp.StatusCode)
		}
		if r := <-e.seen; strings.Contains(r.Header.Get("Cookie"), "boxwire") || r.Header.Get("Cookie") != "theme=dark" {
			t.Fatalf("the app saw cookies %q", r.Header.Get("Cookie"))
		}
	}
	if resp := do(http.MethodGet, "/app.js", "8001-t1.preview.localhost", "boxwire_preview="+sid); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the preview cookie on another port's host: %d", resp.StatusCode)
	}
	sessionValid.Store(false) // logged out, expired or revoked on the bridge
	if resp := do(http.MethodGet, "/app.js", loc.Host, "boxwire_preview="+sid); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the bridge session ended: %d", resp.StatusCode)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
