package server_test

import "testing"

// Every sandbox has its own LLM proxy, but the calls go upstream through
// one client, so the sandboxes share its connections: the turns of two
// threads in two sandboxes, one after the other, reach the model over one
// kept-alive connection.
func TestSandboxesShareUpstreamConnections(t *testing.T) {
	e := newEnv(t)
	a, _ := e.attach("", 0)
	b, _ := e.attach("", 0) // a second thread: its own sandbox and proxy
	if live, _, _, _ := e.mgr.State(); live != 2 {
		t.Fatalf("%d sandboxes, want one per thread", live)
	}
	a.turn("m1", "hi")
	b.turn("m2", "hi")
	a.turn("m3", "again")
	if calls, conns := e.up.connections(); calls != 3 || conns != 1 {
		t.Fatalf("upstream saw %d calls over %d connections, want 3 over 1", calls, conns)
	}
}
