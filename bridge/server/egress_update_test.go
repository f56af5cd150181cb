package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// patchEgress sends PATCH /v1/threads/{id} with body and returns the
// status with the thread on 200, else the error.
func (e *env) patchEgress(id, body string) (int, wire.ThreadInfo, wire.Error) {
	e.t.Helper()
	return e.threadsAPI(http.MethodPatch, "/v1/threads/"+id, body, http.StatusOK)
}

// readEgressRules reads s's events up to the next egress_rules and
// returns its payload.
func (s *session) readEgressRules() wire.EgressRules {
	s.t.Helper()
	env := s.readUntil(wire.TypeEgressRules)
	var ev wire.EgressRules
	if err := env.Decode(&ev); err != nil {
		s.t.Fatalf("egress_rules %s: %v", env.Data, err)
	}
	return ev
}

// TestEgressUpdateRefused: PATCH refuses a body without egress, rules
// that do not parse or are too many (bad_message), rules outside the cap
// or any with no cap (not_allowed), an unknown thread (404) and a caller
// without the token (401); the thread keeps its rules.
func TestEgressUpdateRefused(t *testing.T) {
	tooMany := make([]string, 65)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("h%d.example.com", i)
	}
	many, _ := json.Marshal(map[string]any{"egress": tooMany})
	cases := []struct {
		name, cap, thread, body string
		status                  int
		code                    wire.Code
		says                    string
	}{
		{"no cap", "", "", `{"egress":["api.example.com"]}`, 400, wire.CodeNotAllowed, "does not let threads ask"},
		{"no egress field", ".example.com", "", `{}`, 400, wire.CodeBadMessage, "egress is required"},
		{"null egress", ".example.com", "", `{"egress":null}`, 400, wire.CodeBadMessage, "egress is required"},
		{"not json", ".example.com", "", `egress`, 400, wire.CodeBadMessage, "body"},
		{"bad host", ".example.com", "", `{"egress":["exa mple.com"]}`, 400, wire.CodeBadMessage, "exa mple.com"},
		{"outside cap", ".example.com", "", `{"egress":["api.example.com","evil.test"]}`, 400, wire.CodeNotAllowed, `"evil.test" is outside`},
		{"too many", ".example.com", "", string(many), 400, wire.CodeBadMessage, "at most 64"},
		{"unknown thread", ".example.com", "t_000000000000", `{"egress":["api.example.com"]}`, 404, wire.CodeNotFound, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = splitRules(tc.cap) })
			_, info, _ := e.createThread(`{}`)
			id := info.ID
			if tc.thread != "" {
				id = tc.thread
			}
			code, _, werr := e.patchEgress(id, tc.body)
			if code != tc.status || werr.Code != tc.code || !strings.Contains(werr.Message, tc.says) {
				t.Fatalf("got %d %+v, want %d %s saying %q", code, werr, tc.status, tc.code, tc.says)
			}
			if got := e.threadInfo(info.ID).Egress; got != nil {
				t.Fatalf("refused PATCH left rules %v", got)
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{".example.com"} })
		_, info, _ := e.createThread(`{}`)
		req, _ := http.NewRequest(http.MethodPatch, e.hs.URL+"/v1/threads/"+info.ID, strings.NewReader(`{"egress":["api.example.com"]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || e.threadInfo(info.ID).Egress != nil {
			t.Fatalf("PATCH without token: %d", resp.StatusCode)
		}
	})
}

// TestEgressUpdateProxy: the running sandbox's proxy refuses a host before
// the PATCH, allows it from the next request on, and refuses it again
// once the rules are cleared; each change is an egress_rules event that
// live clients see and the thread's log keeps.
func TestEgressUpdateProxy(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b} })
	s, id := e.attach("", 0)
	dir := e.socketDir(e.threadInfo(id).SandboxID)
	if status, body := viaEgress(t, dir, a); status != 403 || !strings.Contains(body, "PATCH /v1/threads/{id}") {
		t.Fatalf("before: %d %q", status, body)
	}

	code, info, werr := e.patchEgress(id, `{"egress":["`+a+`","`+a+`"]}`)
	if code != 200 || !slices.Equal(info.Egress, []string{a}) || info.ID != id || info.Status != wire.SandboxRunning {
		t.Fatalf("PATCH: %d %+v %+v", code, info, werr)
	}
	if status, body := viaEgress(t, dir, a); status != 200 || body != "A at /x" {
		t.Fatalf("after: %d %q", status, body)
	}
	if status, _ := viaEgress(t, dir, b); status != 403 {
		t.Fatalf("other host after: %d, want 403", status)
	}
	if got := e.threadInfo(id).Egress; !slices.Equal(got, []string{a}) {
		t.Fatalf("GET shows %v", got)
	}
	if ev := s.readEgressRules(); !slices.Equal(ev.Rules, []string{a}) || ev.Previous != nil || ev.By != wire.EgressByAPI {
		t.Fatalf("first event %+v", ev)
	}

	if code, info, werr = e.patchEgress(id, `{"egress":[]}`); code != 200 || info.Egress != nil {
		t.Fatalf("clear: %d %+v %+v", code, info, werr)
	}
	if status, _ := viaEgress(t, dir, a); status != 403 {
		t.Fatalf("after clearing: %d, want 403", status)
	}
	if ev := s.readEgressRules(); len(ev.Rules) != 0 || ev.Rules == nil || !slices.Equal(ev.Previous, []string{a}) {
		t.Fatalf("second event %+v", ev)
	}

	var kept []wire.EgressRules // the log keeps both: a new client replays them
	late, _ := e.attach(id, 0)
	for len(kept) < 2 {
		kept = append(kept, late.readEgressRules())
	}
	if !slices.Equal(kept[0].Rules, []string{a}) || len(kept[1].Rules) != 0 {
		t.Fatalf("replayed %+v", kept)
	}
}

// TestEgressUpdateKeptAcrossRestart: changed rules are in the store: a
// restarted bridge adopts the sandbox with them, not with the rules the
// thread was created with.
func TestEgressUpdateKeptAcrossRestart(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b}; cfg = *c })
	_, info, _ := e.createThread(`{"egress":["` + a + `"]}`)
	if code, _, werr := e.patchEgress(info.ID, `{"egress":["`+b+`"]}`); code != 200 {
		t.Fatalf("PATCH: %d %+v", code, werr)
	}
	e.restart(cfg, nil)
	if got := e.threadInfo(info.ID); !slices.Equal(got.Egress, []string{b}) || got.SandboxID != info.SandboxID {
		t.Fatalf("after restart: %+v", got)
	}
	dir := e.socketDir(info.SandboxID)
	if status, body := viaEgress(t, dir, b); status != 200 || body != "B at /x" {
		t.Fatalf("new rule after restart: %d %q", status, body)
	}
	if status, _ := viaEgress(t, dir, a); status != 403 {
		t.Fatalf("old rule after restart: %d, want 403", status)
	}
}

// TestEgressUpdateSuspended: a suspended thread's rules change in its
// record and its log; the sandbox it is resumed in has them.
func TestEgressUpdateSuspended(t *testing.T) {
	a := loopbackServer(t, "A")
	e := newEnvWith(t, func(c *server.Config) {
		c.EgressThreadMax = []string{a}
		c.IdleTTL, c.ReapInterval = 300*time.Millisecond, 50*time.Millisecond
	})
	s, id := e.attach("", 0)
	s.conn.Close()
	e.awaitStatus(id, wire.SandboxSuspended)
	code, info, werr := e.patchEgress(id, `{"egress":["`+a+`"]}`)
	if code != 200 || info.Status != wire.SandboxSuspended || !slices.Equal(info.Egress, []string{a}) {
		t.Fatalf("PATCH a suspended thread: %d %+v %+v", code, info, werr)
	}
	back, _ := e.attach(id, 0)
	if ev := back.readEgressRules(); !slices.Equal(ev.Rules, []string{a}) {
		t.Fatalf("event in the log: %+v", ev)
	}
	back.readUntil(wire.TypeSandboxReplaced)
	now := e.threadInfo(id)
	if !slices.Equal(now.Egress, []string{a}) {
		t.Fatalf("resumed thread shows %v", now.Egress)
	}
	if status, body := viaEgress(t, e.socketDir(now.SandboxID), a); status != 200 || body != "A at /x" {
		t.Fatalf("resumed sandbox: %d %q", status, body)
	}
}

// TestEgressUpdateAssistantScope: in assistant scope a PATCH on one thread
// changes the shared sandbox's rules: every thread shows them and gets the
// event, and a later thread may join asking for the new rules.
func TestEgressUpdateAssistantScope(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b} })
	_, t1, _ := e.createThread(`{"scope":"assistant","assistant":"helper","egress":["` + a + `"]}`)
	_, t2, _ := e.createThread(`{"scope":"assistant","assistant":"helper"}`)
	s1, _ := e.attach(t1.ID, 0)
	s2, _ := e.attach(t2.ID, 0)
	if code, _, werr := e.patchEgress(t2.ID, `{"egress":["`+b+`"]}`); code != 200 {
		t.Fatalf("PATCH: %d %+v", code, werr)
	}
	for _, s := range []*session{s1, s2} {
		if ev := s.readEgressRules(); !slices.Equal(ev.Rules, []string{b}) || !slices.Equal(ev.Previous, []string{a}) {
			t.Fatalf("event %+v", ev)
		}
	}
	for _, id := range []string{t1.ID, t2.ID} {
		if got := e.threadInfo(id).Egress; !slices.Equal(got, []string{b}) {
			t.Fatalf("thread %s shows %v", id, got)
		}
	}
	dir := e.socketDir(t1.SandboxID)
	if status, _ := viaEgress(t, dir, b); status != 200 {
		t.Fatalf("shared sandbox to the new host: %d", status)
	}
	if status, _ := viaEgress(t, dir, a); status != 403 {
		t.Fatalf("shared sandbox to the old host: %d", status)
	}
	if code, _, werr := e.createThread(`{"scope":"assistant","assistant":"helper","egress":["` + b + `"]}`); code != 201 {
		t.Fatalf("join with the new rules: %d %+v", code, werr)
	}
}

// TestEgressUpdateConcurrent: PATCHes racing on two threads of one
// assistant, while more threads join it, leave the sandbox, the API and
// the store agreeing on one of the lists sent (the store checked by a
// restart).
func TestEgressUpdateConcurrent(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b}; cfg = *c })
	_, t1, _ := e.createThread(`{"scope":"assistant","assistant":"helper"}`)
	_, t2, _ := e.createThread(`{"scope":"assistant","assistant":"helper"}`)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		joined []string // threads created during the PATCHes
	)
	call := func(method, path, body string, want int) []byte {
		req, _ := http.NewRequest(method, e.hs.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		return data
	}
	for i := range 8 {
		id, rule := t1.ID, a
		if i%2 == 1 {
			id, rule = t2.ID, b
		}
		wg.Go(func() { call(http.MethodPatch, "/v1/threads/"+id, `{"egress":["`+rule+`"]}`, http.StatusOK) })
		wg.Go(func() {
			var info wire.ThreadInfo
			if json.Unmarshal(call(http.MethodPost, "/v1/threads", `{"scope":"assistant","assistant":"helper"}`, http.StatusCreated), &info) == nil {
				mu.Lock()
				joined = append(joined, info.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	now := e.threadInfo(t1.ID).Egress
	if len(now) != 1 || !slices.Equal(e.threadInfo(t2.ID).Egress, now) {
		t.Fatalf("threads disagree: %v %v", now, e.threadInfo(t2.ID).Egress)
	}
	e.restart(cfg, nil)
	for _, id := range append([]string{t1.ID, t2.ID}, joined...) {
		if got := e.threadInfo(id).Egress; !slices.Equal(got, now) {
			t.Fatalf("after restart thread %s has %v, want %v", id, got, now)
		}
	}
}
