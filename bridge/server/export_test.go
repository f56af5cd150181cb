package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// exportReq is GET /v1/threads/{id}/events with a raw query.
func (e *env) exportReq(id, query, token string) *http.Response {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	e.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.hs.URL+"/v1/threads/"+id+"/events"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// exported reads a 200 export answer as its events.
func exported(t *testing.T, resp *http.Response) []wire.Envelope {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []wire.Envelope
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), wire.MaxMessageBytes)
	for sc.Scan() {
		env, err := wire.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("export line %q: %v", sc.Bytes(), err)
		}
		evs = append(evs, env)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// The export endpoint: JSON lines of the stored events after a seq, the
// same as a client saw them, and clear errors.
func TestExportEvents(t *testing.T) {
	e := newEnv(t)
	s, id := e.attach("", 0)
	live := s.turn("m1", "hi")
	live = append(live, s.turn("m2", "again")...)

	cases := []struct {
		name, id, query, token string
		status                 int
		from                   int // index in live of the first event exported
	}{
		{name: "all", id: id, token: testToken, status: http.StatusOK, from: 0},
		{name: "after a seq", id: id, query: "?after=3", token: testToken, status: http.StatusOK, from: 3},
		{name: "after the newest", id: id, query: "?after=99", token: testToken, status: http.StatusOK, from: len(live)},
		{name: "bad after", id: id, query: "?after=x", token: testToken, status: http.StatusBadRequest},
		{name: "unknown thread", id: "t_000000000000", token: testToken, status: http.StatusNotFound},
		{name: "no token", id: id, status: http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.exportReq(tc.id, tc.query, tc.token)
			if tc.status != http.StatusOK {
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				return
			}
			if got, want := summary(exported(t, resp)), summary(live[tc.from:]); got != want {
				t.Fatalf("export\n got %s\nwant %s", got, want)
			}
		})
	}
}

// Server-side retention: past MaxEvents the oldest events leave the log
// (the newest stay, the export starts later), and a live thread is never
// deleted for age.
func TestRetentionPrunesTheLog(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.Retention = store.Retention{MaxEvents: 5, MaxAge: time.Nanosecond}
		c.RetentionInterval = 20 * time.Millisecond
	})
	s, id := e.attach("", 0)
	live := s.turn("m1", "hi")
	live = append(live, s.turn("m2", "again")...)
	if len(live) != 8 {
		t.Fatalf("two turns gave %d events: %s", len(live), summary(live))
	}
	testutil.Until(t, "retention cutting the log", waitFor, func() error {
		if evs := exported(t, e.exportReq(id, "", testToken)); summary(evs) != summary(live[3:]) {
			return fmt.Errorf("the log holds %s, want %s", summary(evs), summary(live[3:]))
		}
		return nil
	})
	// The thread is live: still there and still answering.
	s.request(wire.TypePing, "p", nil)
	if ev := s.read(); ev.Type != wire.TypePong {
		t.Fatalf("after retention: %s %s", ev.Type, ev.Data)
	}
	if resp := e.exportReq(id, "?after=8", testToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("live thread export after age retention: %d", resp.StatusCode)
	}
}
