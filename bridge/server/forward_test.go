package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A forwarded client whose thread moves to a relay that refuses the
// client's upstream for good — its credential (401, 403) or its hello
// (not_found) — is ended with that answer rather than dialled again
// every half second for as long as the client stays; a relay shutting
// down (503) is tried again, and the client keeps its connection. Bridge
// b forwards the client to bridge-test; then "bridge-peer" (a fake relay
// with the answer) takes the thread's lease, bridge-test lets the thread
// go and b dials bridge-peer. Without forwarded.refused the refused
// clients stayed open and bridge-peer was dialled every 500 ms.
func TestForwardedClientRefusedByTheNextRelay(t *testing.T) {
	cases := []struct {
		name    string
		answer  http.HandlerFunc // bridge-peer's answer to the upstream's dial
		code    int              // the client's close code; 0: it stays, and bridge-peer is dialled again
		errCode wire.Code        // the answer to the client's hello before the close, if any
	}{
		{"credential refused", answerStatus(http.StatusUnauthorized), websocket.ClosePolicyViolation, ""},
		{"not allowed", answerStatus(http.StatusForbidden), websocket.ClosePolicyViolation, ""},
		{"hello refused", answerHello(wire.CodeNotFound), websocket.CloseNormalClosure, wire.CodeNotFound},
		{"shutting down", answerStatus(http.StatusServiceUnavailable), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := pgDatabase(t)
			var dials atomic.Int32
			peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				dials.Add(1)
				tc.answer(w, r)
			}))
			defer peer.Close()
			f, id := forwardedClient(t, url, peer.URL)
			moveLease(t, url, id, "bridge-peer")
			if werr := f.readError(wire.CodeSandboxUnavailable); !strings.Contains(werr.Message, "went away") {
				t.Fatalf("the forwarded client was told %q; want its relay went away", werr.Message)
			}
			if tc.code == 0 {
				waitDials(t, &dials, 3)
				expectOpen(f, 3*500*time.Millisecond)
				return
			}
			if tc.errCode != "" {
				var werr wire.Error
				if env := f.read(); env.Type != wire.TypeError || env.Decode(&werr) != nil || werr.Code != tc.errCode || env.ID != "h1" {
					t.Fatalf("the refusal is answered with %s %q %s; want the relay's %s answering hello h1", env.Type, env.ID, env.Data, tc.errCode)
				}
			}
			if ce := f.closeOf(); ce.Code != tc.code {
				t.Fatalf("the forwarded client closed with %d %q; want %d", ce.Code, ce.Text, tc.code)
			}
			time.Sleep(3 * 500 * time.Millisecond) // three relay retries
			if n := dials.Load(); n != 1 {
				t.Fatalf("bridge-peer was dialled %d times; want once", n)
			}
		})
	}
}

// expectOpen fails if s's connection closes within d; messages are
// skipped. The connection cannot be read after it.
func expectOpen(s *session, d time.Duration) {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(d))
	for {
		_, _, err := s.conn.ReadMessage()
		var ne interface{ Timeout() bool }
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return
		default:
			s.t.Fatalf("the forwarded client's connection ended: %v", err)
		}
	}
}

// forwardedClient starts two bridges on the database at url — bridge-test,
// which makes and relays a thread, and bridge-b — announces bridge-test
// and bridge-peer (at peerURL), and returns a client of bridge-b on the
// thread (forwarded to bridge-test) after its hello, and the thread's id.
func forwardedClient(t *testing.T, url, peerURL string) (*session, string) {
	t.Helper()
	a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL })
	_, id := a.attach("", 0)
	b := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL, c.BridgeID = url, failoverTTL, "bridge-b" })
	execSQL(t, url, `INSERT INTO bridges (id, address, updated) VALUES ('bridge-test', $1, now()), ('bridge-peer', $2, now())`, a.hs.URL, peerURL)
	s, _ := b.attachTo(id, 0)
	if !strings.Contains(b.logs.String(), "client forwarded to the thread's relay") {
		t.Fatalf("bridge-b did not forward the client:\n%s", b.logs.String())
	}
	return s, id
}

// moveLease gives thread id's lease to holder, as if it took the thread
// over; its relay lets the thread go at its next renewal.
func moveLease(t *testing.T, url, id, holder string) {
	t.Helper()
	if n := execSQL(t, url, `UPDATE leases SET holder = $2, epoch = epoch + 1, expires = now() + interval '1 minute' WHERE thread = $1`, id, holder); n != 1 {
		t.Fatalf("move the lease: %d rows", n)
	}
}

// execSQL runs sql on the database at url and returns how many rows it
// changed.
func execSQL(t *testing.T, url, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// waitDials waits until dials reaches n.
func waitDials(t *testing.T, dials *atomic.Int32, n int32) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for dials.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("bridge-peer was dialled %d times in %s; want %d", dials.Load(), waitFor, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answerStatus refuses the upgrade with status.
func answerStatus(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, http.StatusText(status), status)
	}
}

// answerHello upgrades, reads the hello and answers it with an error of
// code, as a relay refusing the thread does, then closes.
func answerHello(code wire.Code) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(waitFor))
		_, data, err := conn.ReadMessage()
		var hello wire.Envelope
		if err != nil || json.Unmarshal(data, &hello) != nil {
			return
		}
		_ = conn.WriteJSON(wire.ErrorEnvelope(hello.Thread, hello.ID, code, "thread not found (bridge-peer)"))
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(waitFor))
	}
}

// A client whose thread another bridge relays, when that relay refuses
// the first upstream for good, gets the relay's answer rather than
// sandbox_unavailable (which says "try again"): a refused credential is
// unauthorized and a 1008 close, a refused hello the relay's own code; a
// relay shutting down (503) is still sandbox_unavailable. The thread's
// lease names bridge-peer (a fake relay with the answer) before bridge-b
// sees the client. Before, every refusal was sandbox_unavailable.
func TestForwardedClientFirstDialRefused(t *testing.T) {
	cases := []struct {
		name    string
		answer  http.HandlerFunc
		errCode wire.Code
		close   int
	}{
		{"credential refused", answerStatus(http.StatusUnauthorized), wire.CodeUnauthorized, websocket.ClosePolicyViolation},
		{"hello refused", answerHello(wire.CodeNotFound), wire.CodeNotFound, websocket.CloseNormalClosure},
		{"shutting down", answerStatus(http.StatusServiceUnavailable), wire.CodeSandboxUnavailable, websocket.CloseNormalClosure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := pgDatabase(t)
			peer := httptest.NewServer(tc.answer)
			defer peer.Close()
			a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL })
			_, id := a.attach("", 0)
			b := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL, c.BridgeID = url, failoverTTL, "bridge-b" })
			execSQL(t, url, `INSERT INTO bridges (id, address, updated) VALUES ('bridge-peer', $1, now())`, peer.URL)
			moveLease(t, url, id, "bridge-peer")
			s := b.open(id, 0)
			env := s.read()
			var werr wire.Error
			if env.Type != wire.TypeError || env.Decode(&werr) != nil || werr.Code != tc.errCode || env.ID != "h1" {
				t.Fatalf("the hello was answered with %s %q %s; want an error %s answering h1", env.Type, env.ID, env.Data, tc.errCode)
			}
			if ce := s.closeOf(); ce.Code != tc.close {
				t.Fatalf("closed with %d %q; want %d", ce.Code, ce.Text, tc.close)
			}
		})
	}
}
