package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestAuthBeforeUpgrade(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		header http.Header
	}{
		{"no header", nil},
		{"wrong token", authHeader("nope")},
		{"token without scheme", http.Header{"Authorization": {testToken}}},
		{"token prefix", authHeader(testToken[:5])},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), tc.header)
			if err == nil {
				conn.Close()
				t.Fatal("upgrade succeeded without the token")
			}
			if resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("want 401, got %v (%v)", resp, err)
			}
			if werr := decodeJSONError(t, resp); werr.Code != wire.CodeUnauthorized {
				t.Fatalf("error body %+v", werr)
			}
			req, _ := http.NewRequest(http.MethodDelete, e.hs.URL+"/v1/threads/t_000000000000", nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			dresp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			dresp.Body.Close()
			if dresp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("delete without token: %d", dresp.StatusCode)
			}
		})
	}
	resp, err := http.Get(e.hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if _, specs, _, _ := e.mgr.State(); len(specs) != 0 {
		t.Fatalf("sandboxes created without auth: %d", len(specs))
	}
}

func TestNewThreadHandshake(t *testing.T) {
	e := newEnv(t)
	_, id := e.attach("", 0)
	if !regexp.MustCompile(`^t_[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("thread id %q", id)
	}
	_, specs, _, _ := e.mgr.State()
	if len(specs) != 1 {
		t.Fatalf("%d sandboxes created", len(specs))
	}
	spec := specs[0]
	dir := filepath.Join(e.dataDir, "run", id)
	// No secret in the environment: the LLM token comes with the claim.
	wantEnv := []string{
		"BOXWIRE_LISTEN=unix:/run/boxwire-agent/agent.sock",
		"BOXWIRE_LLM_SOCKET=/run/boxwire/llm.sock",
		"OPENAI_BASE_URL=http://boxwire-llm/v1",
		"BOXWIRE_MODEL=test-model",
	}
	if !slices.Equal(spec.Env, wantEnv) {
		t.Fatalf("env %q, want %q", spec.Env, wantEnv)
	}
	if strings.Contains(fmt.Sprintf("%+v", spec), testKey) {
		t.Fatal("the key is in the sandbox spec")
	}
	if spec.Name != "boxwire-"+id || spec.Image != "boxwire:test" || spec.SocketDir != dir || spec.AgentDir != filepath.Join(e.dataDir, "agent", id) ||
		spec.WorkspaceVolume != "boxwire-ws-"+id || spec.User != "1000:1000" {
		t.Fatalf("spec %+v", spec)
	}
	l := spec.Labels
	if l["boxwire.owner"] != "bridge-test" || l["boxwire.thread"] != id || l["boxwire.scope"] != "thread" {
		t.Fatalf("labels %v", l)
	}
	if _, err := time.Parse(time.RFC3339, l["boxwire.created"]); err != nil {
		t.Fatalf("created label: %v", err)
	}
	// The bridge folder is the bridge's, the agent folder the sandbox's.
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bridge folder %v %v", fi, err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Fatalf("bridge folder owned by %d:%d", st.Uid, st.Gid)
	}
	if fi, err := os.Stat(filepath.Join(dir, "llm.sock")); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("llm.sock %v %v", fi, err)
	}
	if fi, err := os.Stat(spec.AgentDir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 || fi.Mode().Perm() != 0o700 {
		t.Fatalf("agent folder %v %v", fi, err)
	}
}

func TestTurnRenumberedAndFannedOut(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)

	got := a.turn("m1", "hi")
	want := "1:user_echo:m1 2:assistant_delta:m1 3:assistant_message:m1 4:turn_done:m1"
	if summary(got) != want {
		t.Fatalf("sender saw %s, want %s", summary(got), want)
	}
	if s := summary(b.readTurn()); s != want {
		t.Fatalf("watcher saw %s, want %s", s, want)
	}
	var text wire.Text
	if err := got[2].Decode(&text); err != nil || text.Text != "hello from the model" {
		t.Fatalf("assistant text %q (%v): the model call did not go through the proxy", text.Text, err)
	}
	for _, ev := range got {
		if ev.Thread != id {
			t.Fatalf("event thread %q", ev.Thread)
		}
	}
	if auths := e.up.authorizations(); len(auths) != 1 || auths[0] != "Bearer "+testKey {
		t.Fatalf("upstream saw authorization %q", auths)
	}

	want = "5:user_echo:m2 6:assistant_delta:m2 7:assistant_message:m2 8:turn_done:m2"
	if s := summary(b.turn("m2", "again")); s != want {
		t.Fatalf("second turn %s", s)
	}
	if s := summary(a.readTurn()); s != want {
		t.Fatalf("first client saw %s", s)
	}
}

func TestReplyGoesOnlyToSender(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	a.request(wire.TypePing, "p1", nil)
	if got := a.read(); got.Type != wire.TypePong || got.ID != "p1" || got.Seq != 0 {
		t.Fatalf("a got %+v", got)
	}
	b.request(wire.TypePing, "p2", nil)
	// Had a's pong been fanned out, it would come before b's own.
	if got := b.read(); got.Type != wire.TypePong || got.ID != "p2" {
		t.Fatalf("b got %+v, want its own pong", got)
	}
}

func TestResumeAfterSeq(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	a.turn("m1", "one")

	c, _ := e.attach(id, 2)
	if s := summary(c.readTurn()); s != "3:assistant_message:m1 4:turn_done:m1" {
		t.Fatalf("replay %s", s)
	}
	a.request(wire.TypeUserMessage, "m2", wire.UserMessage{Text: "two"})
	want := "5:user_echo:m2 6:assistant_delta:m2 7:assistant_message:m2 8:turn_done:m2"
	if s := summary(c.readTurn()); s != want {
		t.Fatalf("live after replay %s", s)
	}
	// A client that saw everything gets only live events.
	d, _ := e.attach(id, 8)
	d.request(wire.TypePing, "p", nil)
	if got := d.read(); got.Type != wire.TypePong {
		t.Fatalf("d got %s seq %d, want nothing replayed", got.Type, got.Seq)
	}
}

func TestBadFramesKeepConnection(t *testing.T) {
	e := newEnv(t)
	s, _ := e.attach("", 0)
	tests := []struct {
		name  string
		frame []byte
		code  wire.Code
	}{
		{"unknown type", []byte(`{"type":"dance","id":"x1"}`), wire.CodeUnknownType},
		{"not json", []byte(`{nope`), wire.CodeBadMessage},
		{"no type", []byte(`{"id":"x"}`), wire.CodeBadMessage},
		{"event from client", []byte(`{"type":"tool_call","id":"x2"}`), wire.CodeBadMessage},
		{"second hello", []byte(`{"type":"hello","data":{"version":1}}`), wire.CodeBadMessage},
		{"too large", []byte(`{"type":"user_message","data":{"text":"` + strings.Repeat("a", wire.MaxMessageBytes) + `"}}`), wire.CodeTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_ = s.conn.SetWriteDeadline(time.Now().Add(waitFor))
			if err := s.conn.WriteMessage(websocket.TextMessage, tc.frame); err != nil {
				t.Fatal(err)
			}
			s.readError(tc.code)
			s.request(wire.TypePing, "after", nil)
			if got := s.read(); got.Type != wire.TypePong || got.ID != "after" {
				t.Fatalf("connection unusable after %s: %+v", tc.name, got)
			}
		})
	}
}

func TestHandshakeRejections(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name  string
		first wire.Envelope
		code  wire.Code
	}{
		{"unknown thread", wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t_000000000000"}), wire.CodeNotFound},
		{"not hello", wire.MustNew(wire.TypePing, "", "p", nil), wire.CodeBadMessage},
		{"other version", wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: 99, Role: wire.RoleClient}), wire.CodeVersionMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, _, err := websocket.DefaultDialer.Dial(e.wsURL(), authHeader(testToken))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			s := &session{t: t, conn: conn}
			s.send(tc.first)
			s.readError(tc.code)
			s.expectClosed()
		})
	}
	if _, specs, _, _ := e.mgr.State(); len(specs) != 0 {
		t.Fatalf("rejected hellos created %d sandboxes", len(specs))
	}
}

// runDirEmpty reports whether no socket folder is left.
func runDirEmpty(t *testing.T, e *env) bool {
	entries, err := os.ReadDir(filepath.Join(e.dataDir, "run"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries) == 0
}

func TestCreateFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*fakeManager)
		code  wire.Code
		text  string
	}{
		{"engine down", func(m *fakeManager) {
			m.SetCreateErr(fmt.Errorf("create container: %w", sandbox.ErrEngineUnavailable))
		}, wire.CodeEngineUnavailable, "container engine"},
		{"image missing", func(m *fakeManager) {
			m.SetCreateErr(fmt.Errorf("create container: %w", sandbox.ErrImageNotFound))
		}, wire.CodeSandboxUnavailable, "image not found"},
		{"sandbox exits before agent is ready", func(m *fakeManager) { m.SetNoAgent(true) },
			wire.CodeSandboxUnavailable, "exited with code 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e.mgr)
			s := e.open("", 0)
			werr := s.readError(tc.code)
			if !strings.Contains(werr.Message, tc.text) {
				t.Fatalf("message %q does not mention %q", werr.Message, tc.text)
			}
			s.expectClosed()
			live, specs, _, volumes := e.mgr.State()
			if live != 0 || !runDirEmpty(t, e) {
				t.Fatalf("left behind: %d sandboxes, run dir empty %v", live, runDirEmpty(t, e))
			}
			if !slices.Contains(volumes, specs[0].WorkspaceVolume) {
				t.Fatalf("workspace volume not removed: %v", volumes)
			}
		})
	}
}

func TestDeleteThread(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	b, _ := e.attach(id, 0)
	del := func() *http.Response {
		req, _ := http.NewRequest(http.MethodDelete, e.hs.URL+"/v1/threads/"+id, nil)
		req.Header = authHeader(testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := del(); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	for _, s := range []*session{a, b} {
		if e := s.readError(wire.CodeNotFound); e.Message != "thread deleted" {
			t.Fatalf("message %q", e.Message)
		}
		if code := s.expectClosed(); code != websocket.CloseNormalClosure {
			t.Fatalf("close code %d", code)
		}
	}
	live, specs, removed, volumes := e.mgr.State()
	if live != 0 || len(removed) != 1 || !slices.Equal(volumes, []string{specs[0].WorkspaceVolume}) || !runDirEmpty(t, e) {
		t.Fatalf("left behind: live %d removed %v volumes %v", live, removed, volumes)
	}
	resp := del()
	if resp.StatusCode != http.StatusNotFound || decodeJSONError(t, resp).Code != wire.CodeNotFound {
		t.Fatalf("second delete: %d", resp.StatusCode)
	}
	s := e.open(id, 0)
	s.readError(wire.CodeNotFound)
}

// Close leaves sandboxes for the next start; Collect (bridge gc) removes them.
func TestCloseLeavesSandboxesForCollect(t *testing.T) {
	e := newEnv(t)
	a, _ := e.attach("", 0)
	b, _ := e.attach("", 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := e.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*session{a, b} {
		if code := s.expectClosed(); code != websocket.CloseGoingAway {
			t.Fatalf("close code %d", code)
		}
	}
	if live, _, removed, _ := e.mgr.State(); live != 2 || len(removed) != 0 {
		t.Fatalf("close removed sandboxes: live %d removed %v", live, removed)
	}
	n, v, err := server.Collect(ctx, e.mgr, "bridge-test", e.dataDir)
	if err != nil || n != 2 || v != 2 {
		t.Fatalf("collect: %d sandboxes, %d volumes, %v", n, v, err)
	}
	live, _, removed, volumes := e.mgr.State()
	if live != 0 || len(removed) != 2 || len(volumes) != 2 || !runDirEmpty(t, e) {
		t.Fatalf("left behind: live %d removed %v volumes %v", live, removed, volumes)
	}
	if err := e.srv.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), authHeader(testToken))
	if err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after close: %v %v", resp, err)
	}
}
