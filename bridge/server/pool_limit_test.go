package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Pooled sandboxes count toward --max-sandboxes: a new thread takes a
// pooled one first, a sandbox made outside the pool evicts a pooled one
// (ready, or being started) rather than failing, and the engine never runs
// more than the limit.
func TestPoolCountsTowardMaxSandboxes(t *testing.T) {
	tests := []struct {
		name      string
		pool, max int
		hold      bool // the pool's sandboxes never finish starting
		bodies    []string
		wantLimit int    // index of the first body answered 429; -1 none
		wantLog   string // what the bridge logs about its pool
	}{
		{name: "a new thread takes the pooled sandbox", pool: 1, max: 1,
			bodies: []string{`{}`, `{}`}, wantLimit: 1, wantLog: "thread took a pooled sandbox"},
		{name: "a shared sandbox evicts a ready pooled one", pool: 1, max: 2,
			bodies:    []string{`{"scope":"assistant","assistant":"a"}`, `{"scope":"assistant","assistant":"b"}`, `{"scope":"assistant","assistant":"c"}`},
			wantLimit: 2, wantLog: "room for a new sandbox under --max-sandboxes"},
		{name: "a new thread cancels the pooled sandbox being started", pool: 1, max: 1, hold: true,
			bodies: []string{`{}`, `{}`}, wantLimit: 1, wantLog: "cancelling a sandbox being started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hold chan struct{}
			if tt.hold {
				hold = make(chan struct{})
			}
			e, pm := newLimitEnv(t, tt.pool, tt.max, hold)
			if tt.hold {
				testutil.RequireReceive(t, "the pool starting a sandbox", pm.held, waitFor)
			} else {
				e.awaitPooled(tt.pool)
			}
			for i, body := range tt.bodies {
				code, _, werr := e.createThread(body)
				switch {
				case i == tt.wantLimit && (code != http.StatusTooManyRequests || werr.Code != wire.CodeSandboxLimit):
					t.Fatalf("request %d: %d %+v, want 429 sandbox limit", i, code, werr)
				case i != tt.wantLimit && code != http.StatusCreated:
					t.Fatalf("request %d: %d %+v, want 201\n%s", i, code, werr, e.logs.String())
				}
			}
			if !strings.Contains(e.logs.String(), tt.wantLog) {
				t.Errorf("bridge did not log %q:\n%s", tt.wantLog, e.logs.String())
			}
			if peak := pm.maxLive(); peak > tt.max {
				t.Errorf("the engine ran %d sandboxes at once, limit %d", peak, tt.max)
			}
			if live, _, _, _ := e.mgr.State(); live != tt.max {
				t.Errorf("%d sandboxes live, want the limit %d (all in use)", live, tt.max)
			}
		})
	}
}

// The pool refills once a thread's sandbox goes, up to the limit only.
func TestPoolRefillsUnderMaxSandboxes(t *testing.T) {
	e, pm := newLimitEnv(t, 2, 2, nil)
	e.awaitPooled(2)
	_, a, _ := e.createThread(`{}`)
	e.createThread(`{}`)
	if code, _, _ := e.createThread(`{}`); code != http.StatusTooManyRequests {
		t.Fatalf("third thread: %d, want 429", code)
	}
	req, _ := http.NewRequest(http.MethodDelete, e.hs.URL+"/v1/threads/"+a.ID, nil)
	req.Header = authHeader(testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.awaitPooled(3) // one refill for the one deleted thread
	if peak := pm.maxLive(); peak > 2 {
		t.Errorf("the engine ran %d sandboxes at once, limit 2", peak)
	}
	if live, _, _, _ := e.mgr.State(); live != 2 {
		t.Errorf("%d sandboxes live, want 2 (one thread, one pooled)", live)
	}
}
