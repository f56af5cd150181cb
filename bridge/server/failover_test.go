package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store/pgstore/pgtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// pgEnv is newEnvWith on a PostgreSQL store of its own (pgtest, real
// server), with a short lease TTL; it skips unless BOXWIRE_PG_TESTS=1.
func pgEnv(t *testing.T) (*env, string) {
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
	t.Cleanup(func() { _ = pg.Stop() }) // after the server's cleanup (LIFO)
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, 900*time.Millisecond }), url
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
}
