package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// lifecycleAnswer lets a test hold a turn open: "hold" starts a turn that
// does not end, "release" ends it. History frames are taken silently.
func (a *fakeAgent) lifecycleAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	var m wire.UserMessage
	switch {
	case env.Type == wire.TypeHistory:
		return nil, true
	case env.Type != wire.TypeUserMessage || env.Decode(&m) != nil:
		return nil, false
	case m.Text == "hold":
		return []wire.Envelope{a.event(wire.TypeUserEcho, env.ID, m)}, true
	case m.Text == "release":
		return []wire.Envelope{a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop})}, true
	}
	return nil, false
}

// fakeImages makes the fake manager a sandbox.ImageResolver: per manager,
// the id each image reference names now, and the id each sandbox was
// created from (recorded on first ask, which the bridge does right after
// creation). A reference without an id is unknown ("").
var fakeImages sync.Map // *fakeManager → *imageState

type imageState struct {
	mu        sync.Mutex
	ref       map[string]string
	bySandbox map[string]string
	lookups   int // ImageID calls: the reaper asks once a tick for each image in use
}

func (m *fakeManager) images() *imageState {
	v, _ := fakeImages.LoadOrStore(m, &imageState{ref: map[string]string{}, bySandbox: map[string]string{}})
	return v.(*imageState)
}

// setImage points ref at image id.
func (m *fakeManager) setImage(ref, id string) {
	st := m.images()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ref[ref] = id
}

func (m *fakeManager) ImageID(_ context.Context, ref string) (string, error) {
	st := m.images()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lookups++
	return st.ref[ref], nil
}

// awaitTicks waits until the reaper has looked the images in use up n
// more times: n reaper ticks have passed (the reaper asks for an image's
// id once a tick while a sandbox runs an image with a known id, setImage).
func (m *fakeManager) awaitTicks(t testing.TB, n int) {
	t.Helper()
	st := m.images()
	lookups := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.lookups
	}
	start := lookups()
	testutil.Eventually(t, fmt.Sprintf("%d reaper ticks", n), 2*waitFor, func() bool { return lookups() >= start+n })
}

func (m *fakeManager) SandboxImageID(ctx context.Context, id string) (string, error) {
	sb, err := m.Inspect(ctx, id)
	if err != nil {
		return "", err
	}
	st := m.images()
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.bySandbox[id]; !ok {
		st.bySandbox[id] = st.ref[sb.Image]
	}
	return st.bySandbox[id], nil
}

var _ sandbox.ImageResolver = (*fakeManager)(nil)

// replaced reads through the next sandbox_exited and sandbox_replaced and
// checks both carry reason.
func (s *session) replaced(reason wire.ExitReason) wire.SandboxReplaced {
	s.t.Helper()
	var ex wire.SandboxExited
	if err := s.readUntil(wire.TypeSandboxExited).Decode(&ex); err != nil || ex.Reason != reason {
		s.t.Fatalf("sandbox_exited %+v (%v), want reason %s", ex, err, reason)
	}
	var rep wire.SandboxReplaced
	if err := s.readUntil(wire.TypeSandboxReplaced).Decode(&rep); err != nil || rep.Reason != reason {
		s.t.Fatalf("sandbox_replaced %+v (%v), want reason %s", rep, err, reason)
	}
	return rep
}

// volumesOf returns the workspace volumes of the specs the manager got.
func (e *env) volumesOf() []string {
	_, specs, _, _ := e.mgr.State()
	var out []string
	for _, sp := range specs {
		if !slices.Contains(out, sp.WorkspaceVolume) {
			out = append(out, sp.WorkspaceVolume)
		}
	}
	return out
}

// awaitStatus polls GET /v1/threads/{id} until its status is want.
func (e *env) awaitStatus(id, want string) wire.ThreadInfo {
	e.t.Helper()
	return testutil.Poll(e.t, fmt.Sprintf("thread %s status %q", id, want), waitFor, func() (wire.ThreadInfo, error) {
		info := e.threadInfo(id)
		if info.Status != want {
			return info, fmt.Errorf("status %q", info.Status)
		}
		return info, nil
	})
}

// statusOf answers GET /v1/threads/{id}'s status code.
func (e *env) statusOf(method, id string) int {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.hs.URL+"/v1/threads/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A sandbox past its maximum lifetime is recycled: a new container on the
// same workspace volume, the conversation handed over, the thread and its
// clients go on.
func TestMaxLifetimeRecycles(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.MaxLifetime = 2 * time.Second // from a creation time in whole seconds
		c.ReapInterval = 50 * time.Millisecond
	})
	s, id := e.attach("", 0)
	s.turn("m1", "remember 42")
	rep := s.replaced(wire.ExitLifetime)
	if rep.Restored < 3 || rep.SandboxID == "" {
		t.Errorf("sandbox_replaced %+v: want the turn's history restored", rep)
	}
	if got := s.turn("m2", "still there?"); got[len(got)-1].Type != wire.TypeTurnDone {
		t.Errorf("turn after recycle: %s", summary(got))
	}
	if v := e.volumesOf(); len(v) != 1 || v[0] != "boxwire-ws-"+id {
		t.Errorf("volumes %v, want the thread's one", v)
	}
	if _, _, _, vols := e.mgr.State(); len(vols) != 0 {
		t.Errorf("volumes removed: %v", vols)
	}
}

// A recycle waits for the running turn; with a short grace it goes ahead
// and says the work was interrupted.
func TestMaxLifetimeWaitsForWork(t *testing.T) {
	cases := []struct {
		name    string
		grace   time.Duration
		release bool
	}{
		{"waits until the turn ends", time.Hour, true},
		{"grace runs out", 300 * time.Millisecond, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *server.Config) {
				c.MaxLifetime = 2 * time.Second // from a creation time in whole seconds
				c.ReapInterval = 50 * time.Millisecond
				c.RecycleGrace = tc.grace
			})
			s, _ := e.attach("", 0)
			s.request(wire.TypeUserMessage, "h1", wire.UserMessage{Text: "hold"})
			s.readUntil(wire.TypeUserEcho)
			if tc.release {
				e.awaitLog("waits for its work to end", 1)
				if live, specs, _, _ := e.mgr.State(); live != 1 || len(specs) != 1 {
					t.Fatalf("recycled during the turn: %d live, %d created", live, len(specs))
				}
				s.request(wire.TypeUserMessage, "r1", wire.UserMessage{Text: "release"})
			}
			var ex wire.SandboxExited
			if err := s.readUntil(wire.TypeSandboxExited).Decode(&ex); err != nil || ex.Reason != wire.ExitLifetime {
				t.Fatalf("sandbox_exited %+v", ex)
			}
			if got := strings.Contains(ex.Message, "interrupted"); got == tc.release {
				t.Errorf("message %q: interrupted mentioned = %v", ex.Message, got)
			}
			s.readUntil(wire.TypeSandboxReplaced)
		})
	}
}

// Idle TTL suspends the thread: no container, thread, log and volume kept;
// attaching again resumes it with its history on the same volume.
func TestIdleSuspendsAndResumes(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.IdleTTL = 300 * time.Millisecond
		c.ReapInterval = 50 * time.Millisecond
	})
	s, id := e.attach("", 0)
	s.turn("m1", "remember 42")
	s.conn.Close()
	info := e.awaitStatus(id, wire.SandboxSuspended)
	if info.Suspended == nil || !info.Expires.After(*info.Suspended) {
		t.Errorf("suspended info %+v: want suspended time and retention end", info)
	}
	e.awaitLog("sandbox suspended", 1)
	testutil.Until(t, "no sandbox live after suspension", waitFor, func() error {
		if live, _, _, _ := e.mgr.State(); live != 0 {
			return fmt.Errorf("%d sandboxes live", live)
		}
		return nil
	})
	if _, _, _, vols := e.mgr.State(); len(vols) != 0 {
		t.Fatalf("volumes removed %v on suspension", vols)
	}
	var list wire.ThreadList
	e.getJSON("/v1/threads", &list)
	if len(list.Threads) != 1 || list.Threads[0].Status != wire.SandboxSuspended {
		t.Errorf("list %+v, want the suspended thread", list)
	}

	s2, got := e.attach(id, 0)
	if got != id {
		t.Fatalf("attached to %s, want %s", got, id)
	}
	var ex wire.SandboxExited
	if err := s2.readUntil(wire.TypeSandboxExited).Decode(&ex); err != nil || ex.Reason != wire.ExitIdle {
		t.Errorf("logged sandbox_exited %+v", ex)
	}
	var rep wire.SandboxReplaced
	if err := s2.readUntil(wire.TypeSandboxReplaced).Decode(&rep); err != nil || rep.Reason != wire.ExitIdle || rep.Restored < 3 {
		t.Errorf("sandbox_replaced %+v, want reason idle with the history", rep)
	}
	s2.turn("m2", "and now?")
	if v := e.volumesOf(); len(v) != 1 || v[0] != "boxwire-ws-"+id {
		t.Errorf("volumes %v, want the thread's one", v)
	}
	if st := e.threadInfo(id).Status; st != wire.SandboxRunning {
		t.Errorf("status %s after resume", st)
	}
}

// A suspended thread goes with its log and volume after ThreadTTL, or at
// once on DELETE.
func TestSuspendedThreadRemoved(t *testing.T) {
	cases := []struct {
		name      string
		threadTTL time.Duration
		del       bool
		retainAge bool // the log retention's age deletes it (retention.go)
	}{
		{"thread ttl", 400 * time.Millisecond, false, false},
		{"delete", time.Hour, true, false},
		{"retention age", time.Hour, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *server.Config) {
				c.IdleTTL = 200 * time.Millisecond
				c.ReapInterval = 50 * time.Millisecond
				c.ThreadTTL = tc.threadTTL
				if tc.retainAge {
					c.Retention = store.Retention{MaxAge: 300 * time.Millisecond}
					c.RetentionInterval = 20 * time.Millisecond
				}
			})
			s, id := e.attach("", 0)
			s.turn("m1", "hi")
			s.conn.Close()
			switch {
			case tc.retainAge: // live threads are kept: it goes once suspended
			case tc.del:
				e.awaitStatus(id, wire.SandboxSuspended)
			default:
				e.awaitLog("suspended thread removed", 1)
			}
			if tc.del {
				if code := e.statusOf(http.MethodDelete, id); code != http.StatusNoContent {
					t.Fatalf("DELETE: %d", code)
				}
			}
			testutil.Until(t, "the suspended thread removed", waitFor, func() error {
				if code := e.statusOf(http.MethodGet, id); code != http.StatusNotFound {
					return fmt.Errorf("GET: %d", code)
				}
				return nil
			})
			// Retention deletes the record, then the volume: the thread
			// is gone (404) a moment before its volume is.
			testutil.Until(t, "the thread's volume removed", waitFor, func() error {
				if _, _, _, vols := e.mgr.State(); !slices.Contains(vols, "boxwire-ws-"+id) {
					return fmt.Errorf("volumes removed %v", vols)
				}
				return nil
			})
			s2 := e.open(id, 0)
			s2.readError(wire.CodeNotFound)
		})
	}
}

// A rebuilt image (same reference, new id) replaces idle sandboxes; a busy
// one waits for its turn to end.
func TestImageUpdateReplaces(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.ReapInterval = 50 * time.Millisecond })
	e.mgr.setImage("boxwire:test", "sha256:aaaaaaaaaaaaaaaaaaaa")
	s, id := e.attach("", 0)
	if got := e.threadInfo(id).ImageID; got != "sha256:aaaaaaaaaaaaaaaaaaaa" {
		t.Fatalf("image id %q", got)
	}
	s.request(wire.TypeUserMessage, "h1", wire.UserMessage{Text: "hold"})
	s.readUntil(wire.TypeUserEcho)
	e.mgr.setImage("boxwire:test", "sha256:bbbbbbbbbbbbbbbbbbbb")
	e.awaitLog("recycling sandbox", 0)
	e.mgr.awaitTicks(t, 6) // several reaper ticks while the turn runs
	if _, specs, _, _ := e.mgr.State(); len(specs) != 1 {
		t.Fatalf("replaced during the turn: %d created", len(specs))
	}
	s.request(wire.TypeUserMessage, "r1", wire.UserMessage{Text: "release"})
	rep := s.replaced(wire.ExitImageUpdate)
	if !strings.Contains(rep.Message, "sha256:aaaaaaaaaaaa") || !strings.Contains(rep.Message, "sha256:bbbbbbbbbbbb") {
		t.Errorf("message %q, want both ids", rep.Message)
	}
	if got := e.threadInfo(id).ImageID; got != "sha256:bbbbbbbbbbbbbbbbbbbb" {
		t.Errorf("image id after update %q", got)
	}
	s.turn("m2", "hi")
}

// An assistant's shared sandbox that dies is recreated once; each thread
// gets its own history back.
func TestAssistantSandboxReplacedOnce(t *testing.T) {
	e := newEnv(t)
	_, a, _ := e.createThread(`{"scope":"assistant","assistant":"helper"}`)
	_, b, _ := e.createThread(`{"scope":"assistant","assistant":"helper"}`)
	sa, _ := e.attach(a.ID, 0)
	sb, _ := e.attach(b.ID, 0)
	sa.turn("m1", "one")
	sb.turn("m1", "two")
	sb.turn("m2", "three")
	e.mgr.Kill(a.SandboxID, 137, false)
	ra, rb := sa.replaced(wire.ExitOOM), sb.replaced(wire.ExitOOM)
	if ra.SandboxID != rb.SandboxID || ra.SandboxID == a.SandboxID {
		t.Errorf("new sandboxes %s and %s (old %s), want one shared new one", ra.SandboxID, rb.SandboxID, a.SandboxID)
	}
	if rb.Restored <= ra.Restored || ra.Restored == 0 {
		t.Errorf("restored %d and %d, want each thread's own history", ra.Restored, rb.Restored)
	}
	if _, specs, _, _ := e.mgr.State(); len(specs) != 2 {
		t.Errorf("%d sandboxes created, want 2 (one replacement)", len(specs))
	}
	sa.turn("m2", "again")
	sb.turn("m3", "again")
}

// A restart leaves a thread without a sandbox suspended (volume kept),
// and a suspended one stays so; both resume on attach.
func TestReconcileKeepsSuspended(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.IdleTTL = 300 * time.Millisecond
		c.ReapInterval = 50 * time.Millisecond
	})
	s, idle := e.attach("", 0)
	s.turn("m1", "hi")
	s.conn.Close()
	e.awaitStatus(idle, wire.SandboxSuspended)
	s2, dead := e.attach("", 0)
	s2.turn("m1", "hello")
	cfg := e.config(func(c *server.Config) { c.ReapInterval = time.Hour })
	e.restart(cfg, func() { // the engine lost the second thread's sandbox too
		list, _ := e.mgr.List(context.Background(), map[string]string{sandbox.LabelThread: dead})
		for _, sb := range list {
			_ = e.mgr.Remove(context.Background(), sb.ID)
		}
	})
	for _, id := range []string{idle, dead} {
		if st := e.threadInfo(id).Status; st != wire.SandboxSuspended {
			t.Errorf("thread %s: status %s after restart, want suspended", id, st)
		}
	}
	if _, _, _, vols := e.mgr.State(); len(vols) != 0 {
		t.Errorf("reconcile removed volumes %v", vols)
	}
	for _, id := range []string{idle, dead} {
		c, _ := e.attach(id, 0)
		c.readUntil(wire.TypeSandboxReplaced)
		c.turn("m9", "back")
	}
}

// config is the env's configuration for a restart, changed by edit.
func (e *env) config(edit func(*server.Config)) server.Config {
	cfg := server.Config{
		Token: testToken, Image: "boxwire:test", DataDir: e.dataDir, Manager: e.mgr,
		Model: "test-model", BridgeID: "bridge-test", Software: "boxwire-bridge/test",
	}
	cfg.LLM.Upstream, cfg.LLM.APIKey = e.up.URL+"/v1", testKey
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

// getJSON GETs path into v.
func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.hs.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}

// A thread whose turn runs is not idle, even with no client attached.
func TestIdleWaitsForWork(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.IdleTTL = 300 * time.Millisecond
		c.ReapInterval = 50 * time.Millisecond
	})
	e.mgr.setImage("boxwire:test", "sha256:aaaaaaaaaaaaaaaaaaaa") // looked up each reaper tick (awaitTicks)
	s, id := e.attach("", 0)
	s.request(wire.TypeUserMessage, "h1", wire.UserMessage{Text: "hold"})
	s.readUntil(wire.TypeUserEcho)
	s.conn.Close()
	e.mgr.awaitTicks(t, 20) // several idle TTLs of reaper ticks
	if st := e.threadInfo(id).Status; st != wire.SandboxRunning {
		t.Fatalf("status %s while a turn runs, want running", st)
	}
	s2, _ := e.attach(id, 0)
	s2.request(wire.TypeUserMessage, "r1", wire.UserMessage{Text: "release"})
	s2.readUntil(wire.TypeTurnDone)
	s2.conn.Close()
	e.awaitStatus(id, wire.SandboxSuspended)
}

// A thread that took a pooled sandbox is recycled like any other: the new
// container is told its thread again and its model calls still work.
func TestMaxLifetimeRecyclesPooled(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.Pool = 1
		c.MaxLifetime = 2 * time.Second // from a creation time in whole seconds
		c.ReapInterval = 50 * time.Millisecond
	})
	e.awaitPooled(1)
	s, _ := e.attach("", 0)
	e.awaitLog("thread took a pooled sandbox", 1)
	s.turn("m1", "remember 42")
	s.replaced(wire.ExitLifetime)
	got := s.turn("m2", "still there?")
	if text := finalText(t, got); text != "hello from the model" {
		t.Errorf("turn after recycle: %s (%q)", summary(got), text)
	}
}

// A request sent while the fleet replaces the sandbox on purpose (here an
// image update) waits for the new agent instead of being refused: the
// new sandbox's agent holds its hello until the request was sent, and the
// request's turn then runs there. Before, the client got "sandbox
// stopped" (e2e TestClientMovesThreadImage saw it once under load).
func TestRequestDuringReplacementWaits(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.ReapInterval = 50 * time.Millisecond })
	e.mgr.setImage("boxwire:test", "sha256:aaaaaaaaaaaaaaaaaaaa")
	s, _ := e.attach("", 0)
	s.turn("m1", "remember 42")
	hold := make(chan struct{})
	e.mgr.holdHellos.Store(&hold)
	e.mgr.setImage("boxwire:test", "sha256:bbbbbbbbbbbbbbbbbbbb")
	s.readUntil(wire.TypeSandboxExited) // the old agent is gone; the new one is not greeted yet
	e.awaitLog("agent connection ended: sandbox replaced", 1)
	s.request(wire.TypeUserMessage, "m2", wire.UserMessage{Text: "still there?"})
	time.Sleep(100 * time.Millisecond) // let a refusal, if any, come first
	e.mgr.holdHellos.Store(nil)
	close(hold)
	var events []wire.Envelope
	for {
		env := s.read()
		events = append(events, env)
		if env.Type == wire.TypeError {
			t.Fatalf("the request during the replacement was refused: %s", env.Data)
		}
		if env.Type == wire.TypeTurnDone {
			break
		}
	}
	if !slices.ContainsFunc(events, func(ev wire.Envelope) bool { return ev.Type == wire.TypeSandboxReplaced }) {
		t.Errorf("no sandbox_replaced before the turn: %s", summary(events))
	}
}
