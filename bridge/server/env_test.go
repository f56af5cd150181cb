package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	testToken = "bridge-token-42"
	testKey   = "sk-upstream-SECRET-9876"
	// waitFor bounds every wait in these tests.
	waitFor = 5 * time.Second
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// upstream is a fake model endpoint that answers only with the real key.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	auths   []string
	remotes []string // the client address of every call
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.auths = append(u.auths, r.Header.Get("Authorization"))
	u.remotes = append(u.remotes, r.RemoteAddr)
	u.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+testKey || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hello from the model"}}]}`)
}

// connections returns how many calls came and over how many connections.
func (u *upstream) connections() (calls, conns int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range u.remotes {
		seen[r] = true
	}
	return len(u.remotes), len(seen)
}

func (u *upstream) authorizations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...)
}

// env is one bridge server with a fake engine and a fake model endpoint.
type env struct {
	t       *testing.T
	mgr     *fakeManager
	up      *upstream
	srv     *server.Server
	hs      *httptest.Server
	dataDir string
	logs    *syncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with cfg changed by edit (when not nil) before the
// server is made.
func newEnvWith(t *testing.T, edit func(*server.Config)) *env {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "bw") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, mgr: newFakeManager(), up: &upstream{}, dataDir: dataDir, logs: &syncBuffer{}}
	e.up.Server = httptest.NewServer(http.HandlerFunc(e.up.serve))
	cfg := server.Config{
		Token: testToken, Image: "boxwire:test", DataDir: dataDir, Manager: e.mgr,
		LLM:   llmproxy.Config{Upstream: e.up.URL + "/v1", APIKey: testKey},
		Model: "test-model", BridgeID: "bridge-test", Software: "boxwire-bridge/test",
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	e.srv, err = server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.hs = httptest.NewServer(e.srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := e.srv.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
		// Close leaves sandboxes for adoption; collect them (and stop the
		// fake agents).
		if _, _, err := server.Collect(ctx, e.mgr, "bridge-test", dataDir); err != nil {
			t.Errorf("collect: %v", err)
		}
		e.hs.Close()
		e.up.Close()
		os.RemoveAll(dataDir)
		if strings.Contains(e.logs.String(), testKey) {
			t.Errorf("key in bridge logs:\n%s", e.logs.String())
		}
	})
	return e
}

func (e *env) wsURL() string { return "ws" + strings.TrimPrefix(e.hs.URL, "http") + wire.Path }

func authHeader(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// session is one client connection.
type session struct {
	t    *testing.T
	conn *websocket.Conn
}

// open connects and sends hello, without reading the answer.
func (e *env) open(thread string, afterSeq uint64) *session {
	e.t.Helper()
	d := websocket.Dialer{HandshakeTimeout: waitFor}
	conn, _, err := d.Dial(e.wsURL(), authHeader(testToken))
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { conn.Close() })
	s := &session{t: e.t, conn: conn}
	s.send(wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{
		Version: wire.Version, Role: wire.RoleClient, Thread: thread, AfterSeq: afterSeq}))
	return s
}

// attach connects and expects the bridge's hello; it returns the thread id.
func (e *env) attach(thread string, afterSeq uint64) (*session, string) {
	e.t.Helper()
	s := e.open(thread, afterSeq)
	env := s.read()
	var h wire.Hello
	if env.Type != wire.TypeHello || env.Decode(&h) != nil {
		e.t.Fatalf("want hello, got %s %s", env.Type, env.Data)
	}
	if h.Role != wire.RoleBridge || h.Thread == "" || env.Thread != h.Thread || h.Version != wire.Version {
		e.t.Fatalf("bad hello answer: %+v", h)
	}
	return s, h.Thread
}

func (s *session) send(env wire.Envelope) {
	s.t.Helper()
	_ = s.conn.SetWriteDeadline(time.Now().Add(waitFor))
	if err := s.conn.WriteJSON(env); err != nil {
		s.t.Fatalf("send %s: %v", env.Type, err)
	}
}

func (s *session) request(typ wire.Type, id string, payload any) {
	s.t.Helper()
	s.send(wire.MustNew(typ, "", id, payload))
}

// read returns the next message, failing the test after waitFor.
func (s *session) read() wire.Envelope {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(waitFor))
	_, data, err := s.conn.ReadMessage()
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	env, err := wire.Parse(data)
	if err != nil {
		s.t.Fatalf("parse %s: %v", data, err)
	}
	return env
}

// readError reads the next message and checks it is an error with code.
func (s *session) readError(code wire.Code) wire.Error {
	s.t.Helper()
	env := s.read()
	var e wire.Error
	if env.Type != wire.TypeError || env.Decode(&e) != nil || e.Code != code {
		s.t.Fatalf("want error %s, got %s %s", code, env.Type, env.Data)
	}
	return e
}

// expectClosed reads until the connection closes and returns the close
// code (or -1 when it ended without a close frame).
func (s *session) expectClosed() int {
	s.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		_ = s.conn.SetReadDeadline(deadline)
		_, _, err := s.conn.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			s.t.Fatalf("connection still open after %s", waitFor)
		}
		return -1
	}
}

// turn sends a user_message and returns the turn's events through turn_done.
func (s *session) turn(id, text string) []wire.Envelope {
	s.t.Helper()
	s.request(wire.TypeUserMessage, id, wire.UserMessage{Text: text})
	return s.readTurn()
}

func (s *session) readTurn() []wire.Envelope {
	s.t.Helper()
	var events []wire.Envelope
	for {
		env := s.read()
		events = append(events, env)
		if env.Type == wire.TypeTurnDone {
			return events
		}
	}
}

// summary renders events as "seq:type:id" for comparison.
func summary(events []wire.Envelope) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("%d:%s:%s", e.Seq, e.Type, e.ID))
	}
	return strings.Join(parts, " ")
}

func decodeJSONError(t *testing.T, resp *http.Response) wire.Error {
	t.Helper()
	var body struct {
		Error wire.Error `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body: %v", err)
	}
	return body.Error
}

// openSmallBuffer attaches a client whose socket receive buffer is tiny, so
// that it falls behind quickly when it does not read.
func (e *env) openSmallBuffer(thread string) *session {
	e.t.Helper()
	d := websocket.Dialer{HandshakeTimeout: waitFor, NetDialContext: (&net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
			return errors.Join(err, serr)
		},
	}).DialContext}
	conn, _, err := d.Dial(e.wsURL(), authHeader(testToken))
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { conn.Close() })
	s := &session{t: e.t, conn: conn}
	s.request(wire.TypeHello, "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: thread})
	if got := s.read(); got.Type != wire.TypeHello {
		e.t.Fatalf("want hello, got %s", got.Type)
	}
	return s
}
