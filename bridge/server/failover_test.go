package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store/pgstore/pgtest"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// failoverTTL is the lease TTL of the fail-over tests' bridges.
const failoverTTL = 900 * time.Millisecond

// pgDatabase starts a PostgreSQL for the test (pgtest, a real server)
// and returns the URL of a new database on it; it skips unless
// BOXWIRE_PG_TESTS=1. The server stops after the bridges made later
// (cleanups run last first).
func pgDatabase(t *testing.T) string {
	t.Helper()
	if !pgtest.Enabled() {
		t.Skip("PostgreSQL tests are off: set " + pgtest.EnvVar + "=1 (make unit does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// pgEnv is newEnvWith on a PostgreSQL store of its own with a short lease
// TTL.
func pgEnv(t *testing.T) (*env, string) {
	url := pgDatabase(t)
	return newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL }), url
}

// closeOf reads until the connection closes and returns its close frame.
func (s *session) closeOf() *websocket.CloseError {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(waitFor))
	for {
		_, _, err := s.conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		if err != nil {
			s.t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

// A bridge whose thread's lease another bridge took (it expired while
// this one could not renew it) stops relaying the thread at its next
// renewal: its client is closed with 1001 and says why, the sandbox keeps
// running (the new relay adopts it), nothing more is written to the log,
// and a new client of the thread is sent to the lease's holder. Without
// letGo the bridge only logged the loss and went on relaying.
func TestLostLeaseStopsRelaying(t *testing.T) {
	e, url := pgEnv(t)
	s, id := e.attach("", 0)
	s.turn("m1", "hello")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var last int64
	if err := db.QueryRow(ctx, `SELECT last_seq FROM thread_logs WHERE thread = $1`, id).Scan(&last); err != nil {
		t.Fatal(err)
	}
	// As if the lease ran out and bridge-peer took the thread.
	tag, err := db.Exec(ctx, `UPDATE leases SET holder = 'bridge-peer', epoch = epoch + 1, expires = now() + interval '1 minute'
WHERE thread = $1 AND holder = 'bridge-test'`, id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("take the lease: %v, %d rows", err, tag.RowsAffected())
	}
	ce := s.closeOf()
	if ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "another bridge") {
		t.Fatalf("client closed with %d %q; want 1001 naming another bridge", ce.Code, ce.Text)
	}
	if live, _, removed, _ := e.mgr.State(); live != 1 || len(removed) != 0 {
		t.Fatalf("sandboxes: %d live, removed %v; want the thread's still running", live, removed)
	}
	r := e.open(id, 0)
	if werr := r.readError(wire.CodeSandboxUnavailable); !strings.Contains(werr.Message, "bridge-peer") {
		t.Fatalf("a new client of the thread got %q; want it sent to bridge-peer", werr.Message)
	}
	var now int64
	if err := db.QueryRow(ctx, `SELECT last_seq FROM thread_logs WHERE thread = $1`, id).Scan(&now); err != nil || now != last {
		t.Fatalf("the log went from seq %d to %d (%v) after the lease was lost", last, now, err)
	}
	if !strings.Contains(e.logs.String(), "stopped relaying the thread") {
		t.Fatalf("no log of letting the thread go:\n%s", e.logs.String())
	}
	m := e.metricsText()
	for _, want := range []string{"boxwire_leases_lost_total 1\n", "boxwire_leases_held 0\n", "boxwire_store_up 1\n",
		"# TYPE boxwire_event_append_seconds histogram\n", `boxwire_event_append_seconds_bucket{le="+Inf"} `} {
		if !strings.Contains(m, want) {
			t.Errorf("GET /metrics lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, `boxwire_event_append_seconds_bucket{le="+Inf"} 0`+"\n") {
		t.Errorf("the turn's events are not in the append latency:\n%s", m)
	}
}

// metricsText is the bridge's GET /metrics answer (the admin token).
func (e *env) metricsText() string {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d %s", resp.StatusCode, data)
	}
	return string(data)
}

// A bridge that stops (Close: its leases released, its sandboxes left
// running) hands its thread to another bridge on the store, with no
// client asking: the other adopts the running sandbox, made by the first
// in its own data folder (its proxies served again there, its agent
// greeted), no second sandbox is made, and a client of the second bridge
// resumes by cursor — no event again, the seqs go on — and runs a turn
// whose model call goes through the new relay's proxy.
func TestTakeOverWhenItsBridgeStops(t *testing.T) {
	url := pgDatabase(t)
	a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL })
	s, id := a.attach("", 0)
	first := s.turn("m1", "hello")
	last := first[len(first)-1].Seq
	b := newEnvWith(t, func(c *server.Config) {
		c.StoreURL, c.LeaseTTL, c.BridgeID, c.Manager = url, failoverTTL, "bridge-b", a.mgr
	})
	b.mgr = a.mgr
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "bridge-b relays the thread", waitFor, func() bool {
		return strings.Contains(b.logs.String(), "took over a thread whose bridge is gone")
	})
	r, _ := b.attachTo(id, last)
	got := r.turn("m2", "again")
	if got[0].Seq != last+1 {
		t.Fatalf("after the takeover the first event is seq %d, want %d: %s", got[0].Seq, last+1, summary(got))
	}
	checkSeqs(t, got, last+1)
	if m := b.metricsText(); !strings.Contains(m, "boxwire_threads_taken_over_total 1\n") || !strings.Contains(m, "boxwire_leases_held 1\n") {
		t.Errorf("bridge-b's GET /metrics after the takeover:\n%s", m)
	}
	if live, specs, removed, _ := a.mgr.State(); live != 1 || len(specs) != 1 || len(removed) != 0 {
		t.Fatalf("sandboxes: %d live, %d made, removed %v; want the first one only, still running", live, len(specs), removed)
	}
	if calls, _ := b.up.connections(); calls == 0 {
		t.Fatal("the turn's model call did not go through bridge-b's proxy")
	}
	// The first bridge starts again on its data folder: its sandbox,
	// which bridge-b relays now, is left to bridge-b — not adopted, not
	// removed, its sockets untouched — and the thread goes on there.
	a2, err := server.New(server.Config{Token: testToken, Image: "boxwire:test", DataDir: a.dataDir, Manager: a.mgr,
		LLM: llmproxy.Config{Upstream: a.up.URL + "/v1", APIKey: testKey}, BridgeID: "bridge-test",
		StoreURL: url, LeaseTTL: failoverTTL, Logger: slog.New(slog.NewTextHandler(a.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close(context.Background())
	if err := a2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if live, specs, removed, _ := a.mgr.State(); live != 1 || len(specs) != 1 || len(removed) != 0 {
		t.Fatalf("after the first bridge's restart: %d live, %d made, removed %v", live, len(specs), removed)
	}
	sock := filepath.Join(a.dataDir, "run", id, "llm.sock") // the box is the thread's: its id
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("the sandbox's LLM socket does not answer after the first bridge's restart: %v", err)
	} else {
		c.Close()
	}
	before, _ := b.up.connections()
	checkSeqs(t, r.turn("m3", "still there"), got[len(got)-1].Seq+1)
	if after, _ := b.up.connections(); after != before+1 {
		t.Fatalf("model calls through bridge-b's proxy went from %d to %d in a turn: the restart took its socket", before, after)
	}
}

// attachTo attaches to thread id after seq afterSeq and returns the
// session and the hello.
func (e *env) attachTo(id string, afterSeq uint64) (*session, wire.Hello) {
	e.t.Helper()
	s := e.open(id, afterSeq)
	env := s.read()
	var h wire.Hello
	if env.Type != wire.TypeHello || env.Decode(&h) != nil || h.Thread != id {
		e.t.Fatalf("want hello of %s, got %s %s", id, env.Type, env.Data)
	}
	return s, h
}

// checkSeqs fails unless evs are numbered from, from+1, …
func checkSeqs(t *testing.T, evs []wire.Envelope, from uint64) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != from+uint64(i) {
			t.Fatalf("event %d has seq %d, want %d: %s", i, e.Seq, from+uint64(i), summary(evs))
		}
	}
}

// A key revoked through one bridge closes its connections on another
// bridge on the same store, at that bridge's next lease tick
// (users.Recheck), as it does on the revoking bridge; a connection of
// another key stays. Before, only the revoking bridge's closed.
func TestRevokedKeyClosesOtherBridgesConnections(t *testing.T) {
	url := pgDatabase(t)
	a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL })
	mgr := newFakeManager()
	t.Cleanup(func() { // after bridge-b's server closed (cleanups run last first)
		if _, _, err := server.Collect(context.Background(), mgr, "bridge-b", ""); err != nil {
			t.Errorf("collect bridge-b's sandboxes: %v", err)
		}
	})
	b := newEnvWith(t, func(c *server.Config) {
		c.StoreURL, c.LeaseTTL, c.BridgeID, c.Manager = url, failoverTTL, "bridge-b", mgr
	})
	revoked, keyID := a.userKey("carol")
	other, _ := a.userKey("dave")
	dial := func(key string) *session {
		conn, _, err := (&websocket.Dialer{HandshakeTimeout: waitFor}).Dial(b.wsURL(), authHeader(key))
		if err != nil {
			t.Fatalf("dial bridge-b: %v", err)
		}
		t.Cleanup(func() { conn.Close() })
		s := &session{t: t, conn: conn}
		s.send(wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{Version: wire.Version, Role: wire.RoleClient}))
		if env := s.read(); env.Type != wire.TypeHello {
			t.Fatalf("want hello, got %s %s", env.Type, env.Data)
		}
		return s
	}
	s, kept := dial(revoked), dial(other)
	a.adminJSON("DELETE", "/v1/keys/"+keyID, "", nil)
	if ce := s.closeOf(); ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("bridge-b closed the revoked key's connection with %d %q; want 1008", ce.Code, ce.Text)
	}
	kept.request(wire.TypePing, "p1", struct{}{})
	if env := kept.read(); env.Type != wire.TypePong {
		t.Fatalf("the other key's connection: %s %s, want pong", env.Type, env.Data)
	}
}

// A thread in a sandbox it took from the warm pool (whose labels name no
// thread) is taken over as well when its bridge stops: no sandbox is
// made for it, and a client of the other bridge resumes by cursor.
func TestTakeOverOfAPooledSandbox(t *testing.T) {
	url := pgDatabase(t)
	a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL, c.Pool = url, failoverTTL, 1 })
	a.awaitPooled(1) // pool_test.go
	s, id := a.attach("", 0)
	a.awaitPooled(2) // the thread took the first: the pool starts another
	first := s.turn("m1", "hello")
	last := first[len(first)-1].Seq
	b := newEnvWith(t, func(c *server.Config) {
		c.StoreURL, c.LeaseTTL, c.BridgeID, c.Manager = url, failoverTTL, "bridge-b", a.mgr
	})
	b.mgr = a.mgr
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.srv.Close(ctx); err != nil { // the pool's spare goes; the thread's sandbox stays
		t.Fatal(err)
	}
	_, made, _, _ := a.mgr.State()
	testutil.Eventually(t, "bridge-b relays the thread", waitFor, func() bool {
		return strings.Contains(b.logs.String(), "took over a thread whose bridge is gone")
	})
	r, _ := b.attachTo(id, last)
	checkSeqs(t, r.turn("m2", "again"), last+1)
	if live, specs, _, _ := a.mgr.State(); live != 1 || len(specs) != len(made) {
		t.Fatalf("sandboxes: %d live, %d made (%d before the takeover); want the thread's pooled one only", live, len(specs), len(made))
	}
}

// slowCreate is a fake engine whose Create waits until release is
// closed.
type slowCreate struct {
	*fakeManager
	release chan struct{}
	started chan struct{} // closed at the first Create that waits
	once    sync.Once
	slow    atomic.Bool
}

func (m *slowCreate) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if m.slow.Load() {
		m.once.Do(func() { close(m.started) })
		<-m.release
	}
	return m.fakeManager.Create(ctx, spec)
}

// A resume takes the thread's lease before it makes the sandbox, and
// keeps it renewed while the sandbox is slow to come, longer than the
// lease TTL: another bridge cannot take the thread meanwhile. Before,
// the renewer released the lease at its next tick (the thread was not
// registered yet), and a client of another bridge took the thread.
func TestLeaseKeptWhileAResumeStarts(t *testing.T) {
	url := pgDatabase(t)
	mgr := &slowCreate{fakeManager: newFakeManager(), release: make(chan struct{}), started: make(chan struct{})}
	e := newEnvWith(t, func(c *server.Config) {
		c.StoreURL, c.LeaseTTL, c.Manager = url, failoverTTL, mgr
		c.IdleTTL, c.ReapInterval = 300*time.Millisecond, 50*time.Millisecond
	})
	e.mgr = mgr.fakeManager
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(mgr.release) }) }
	t.Cleanup(release) // before the server's cleanup, which waits for the resume
	s, id := e.attach("", 0)
	s.turn("m1", "remember 42")
	s.conn.Close()
	e.awaitStatus(id, wire.SandboxSuspended)
	mgr.slow.Store(true)
	done := make(chan *session, 1)
	go func() { // the resume waits in Create; the test goroutine must not block on it
		r := e.open(id, 0)
		done <- r
	}()
	testutil.RequireClosed(t, "the resume's Create", mgr.started, waitFor)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	held := func() string {
		var h string
		_ = db.QueryRow(ctx, `SELECT holder FROM leases WHERE thread = $1 AND expires > now()`, id).Scan(&h)
		return h
	}
	until := time.Now().Add(3 * failoverTTL) // the scenario: a start slower than the lease TTL
	for time.Now().Before(until) {
		if h := held(); h != "bridge-test" {
			t.Fatalf("while the resume starts the thread's lease is held by %q, want bridge-test", h)
		}
		time.Sleep(50 * time.Millisecond) // a sampling pace, not a wait for a condition
	}
	release()
	r := <-done
	if env := r.read(); env.Type != wire.TypeHello {
		t.Fatalf("the resume answered %s %s", env.Type, env.Data)
	}
}
