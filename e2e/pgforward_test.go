package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// A forwarded client's events come from the store (issue 22): two
// bridges on PostgreSQL (lease TTL 2 s); bridge 0 makes and relays a
// thread, and two clients of bridge 1 watch it, one driving a turn whose
// command streams. Bridge 0 is killed with SIGKILL mid-command. The
// forwarded clients keep their WebSockets: bridge 1 takes the thread over
// (and sends their requests to itself from then on), and each client sees
// every seq from 1 to the turn's end exactly once, all 150 lines and one
// turn_done that stopped normally, on the connection it opened before the
// kill; then its next turn runs through the same connection.
// (TestStorePostgresFailOver has three bridges: there a forwarded
// client's requests may go to another bridge after the takeover.)
func TestStorePostgresForwardedClientKeepsItsConnection(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, failoverScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String())
	w0 := envs[0].watch("", 0, newSeqBook()) // made, and relayed, by bridge 0
	thread := w0.thread
	books := []*seqBook{newSeqBook(), newSeqBook()}
	ws := []*watcher{envs[1].watch(thread, 0, books[0]), envs[1].watch(thread, 0, books[1])}
	id := ws[0].say(t, "please run the lines")
	books[0].await(t, "the command's output", turnTimeout, func(wire.Envelope) bool {
		return strings.Contains(outputOf(books[0].events(), id), "line 20")
	})
	killed := time.Now()
	if err := envs[0].bridge.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-envs[0].bridge.done
	t.Logf("bridge 0 killed after seq %d", books[0].last())
	for k, b := range books {
		b.await(t, fmt.Sprintf("turn_done through forwarded client %d", k), turnTimeout, isType(wire.TypeTurnDone, id))
	}
	t.Logf("turn done %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if !strings.Contains(envs[1].bridge.logText(), "took over a thread whose bridge is gone") {
		t.Error("bridge 1 did not log taking the thread over")
	}
	checkLinesTurn(t, books, id)
	id2 := ws[1].say(t, "and now?") // to the new relay
	for k, b := range books {
		b.await(t, fmt.Sprintf("the next turn's turn_done through client %d", k), turnTimeout, isType(wire.TypeTurnDone, id2))
		b.check(t)
	}
	for k, w := range ws {
		select {
		case <-w.done:
			t.Errorf("forwarded client %d's connection ended: %v", k, w.err)
		default:
		}
	}
}

// checkLinesTurn checks that every book saw each seq once, the 150 lines
// of failoverScript's turn id and one turn_done of it that stopped.
func checkLinesTurn(t *testing.T, books []*seqBook, id string) {
	t.Helper()
	for k, b := range books {
		b.check(t)
		countLines(t, outputOf(b.events(), id), 150)
		if ds := turnDones(b, id); len(ds) != 1 || ds[0].Reason != wire.ReasonStop {
			t.Errorf("client %d: turn_done %+v; want one that stopped", k, ds)
		}
	}
}

// A key revoked through the bridge that forwards a client closes that
// client's connection at once (1008), as it closes an attached client's:
// the forwarding bridge watches the key itself, not only the relay (which
// rechecks a key revoked through another bridge at its next lease tick:
// every 20 s with the 60 s lease TTL here, so the relay's close cannot
// pass for the forwarding bridge's). Another key's forwarded connection
// stays. Without the watch the connection closed 18.8 s after the
// revocation (the relay's recheck).
func TestStorePostgresForwardedClientRevoked(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, approvalScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=60s")
	carol, dave := envs[0].newUser("carol"), envs[0].newUser("dave")
	thread := envs[0].dialWith(carol, "").conn.Thread() // relayed by bridge 0
	s := envs[1].dialWith(carol, thread)                // forwarded to bridge 0
	_, keysBody := envs[1].call(envs[1].token, http.MethodGet, "/v1/keys?user=carol", nil)
	var keys struct {
		Keys []struct{ ID string } `json:"keys"`
	}
	if err := json.Unmarshal(keysBody, &keys); err != nil || len(keys.Keys) != 1 {
		t.Fatalf("carol's keys: %s", keysBody)
	}
	kept := envs[1].dialWith(dave, envs[0].dialWith(dave, "").conn.Thread())
	start := time.Now()
	if code, body := envs[1].call(envs[1].token, http.MethodDelete, "/v1/keys/"+keys.Keys[0].ID, nil); code != http.StatusOK {
		t.Fatalf("revoke through bridge 1: %d %s", code, body)
	}
	select {
	case <-drain(s):
	case <-time.After(eventTimeout):
		t.Fatal("the revoked key's forwarded connection is still open")
	}
	d := time.Since(start)
	t.Logf("the revoked key's forwarded connection closed %s after the revocation", d.Round(time.Millisecond))
	if d > time.Second {
		t.Errorf("the revoked key's forwarded connection closed %s after the revocation; want at once", d)
	}
	var ce *websocket.CloseError
	if err := s.conn.Err(); !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
		t.Errorf("the revoked key's forwarded connection ended with %v; want 1008", err)
	}
	if !strings.Contains(envs[1].bridge.logText(), "credentials revoked: closing the forwarded connection") {
		t.Errorf("bridge 1 did not close the forwarded connection itself:\n%s", envs[1].bridge.logText())
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if _, err := kept.conn.Ping(ctx); err != nil { // a round trip to the relay through bridge 1
		t.Fatalf("the other key's forwarded connection: %v", err)
	}
}

// drain reads s's events until its connection ends; the channel closes
// then.
func drain(s *session) <-chan struct{} {
	done := make(chan struct{})
	go func() { // ends with the connection (the test's cleanup closes it)
		defer close(done)
		for range s.conn.Events() {
		}
	}()
	return done
}
