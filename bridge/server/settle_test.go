package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
)

// A client's hello for another bridge's thread whose lease has run out,
// sent to a bridge whose renewals have not settled yet (it just started,
// or the store just came back), waits for them to settle as the periodic
// takeover does: the thread's relay renews its lease meanwhile, and the
// client is forwarded to it instead of the thread being taken over (or
// resumed in a second sandbox) under the relay. Before, bridge-b took the
// thread at once and bridge-test let it go, closing its own client.
func TestHelloWaitsForRenewalsToSettle(t *testing.T) {
	url := pgDatabase(t)
	a := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL = url, failoverTTL })
	s, id := a.attach("", 0)
	s.turn("m1", "hello")
	execSQL(t, url, `INSERT INTO bridges (id, address, updated) VALUES ('bridge-test', $1, now())`, a.hs.URL)
	b := newEnvWith(t, func(c *server.Config) { c.StoreURL, c.LeaseTTL, c.BridgeID = url, failoverTTL, "bridge-b" })
	// As after a store outage: the thread's lease has run out, and
	// bridge-test renews it at its next tick (every TTL/3).
	if n := execSQL(t, url, `UPDATE leases SET expires = now() WHERE thread = $1`, id); n != 1 {
		t.Fatalf("expire the lease: %d rows", n)
	}
	start := time.Now()
	b.attachTo(id, 0)
	t.Logf("bridge-b answered the hello after %s", time.Since(start).Round(time.Millisecond))
	if logs := b.logs.String(); !strings.Contains(logs, "client forwarded to the thread's relay") || strings.Contains(logs, "took over") {
		t.Fatalf("bridge-b did not forward the client to bridge-test:\n%s", logs)
	}
	if _, specs, _, _ := b.mgr.State(); len(specs) != 0 {
		t.Fatalf("bridge-b made %d sandboxes; want none", len(specs))
	}
	time.Sleep(time.Until(start.Add(failoverTTL))) // bridge-test's renewals: it would have lost the lease by now
	if strings.Contains(a.logs.String(), "stopped relaying the thread") {
		t.Fatalf("bridge-test let the thread go:\n%s", a.logs.String())
	}
	s.turn("m2", "still here") // bridge-test's own client goes on
}
