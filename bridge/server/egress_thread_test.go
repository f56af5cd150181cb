package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// loopbackServer serves "name at /path" on 127.0.0.1 and returns its
// host:port.
func loopbackServer(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s at %s", name, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// socketDir is the socket folder of the sandbox the fake engine runs as id.
func (e *env) socketDir(sandboxID string) string {
	e.t.Helper()
	sb, err := e.mgr.Inspect(context.Background(), sandboxID)
	if err != nil {
		e.t.Fatal(err)
	}
	return filepath.Join(e.dataDir, "run", sb.Labels[sandbox.LabelBox])
}

// viaEgress sends GET http://hostPort/path through the egress proxy in a
// sandbox's socket folder, as a command in the sandbox would, and returns
// the status and body.
func viaEgress(t *testing.T, dir, hostPort string) (int, string) {
	t.Helper()
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, "egress.sock"))
		},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: waitFor}
	resp, err := c.Get("http://" + hostPort + "/x")
	if err != nil {
		t.Fatalf("GET %s through %s: %v", hostPort, dir, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// TestThreadEgressRefusedBeforeCreation: rules that do not parse are a
// bad_message, rules outside the cap (or any, with no cap) not_allowed,
// and nothing is created for either.
func TestThreadEgressRefusedBeforeCreation(t *testing.T) {
	tooMany := make([]string, 65)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("h%d.example.com", i)
	}
	many, _ := json.Marshal(map[string]any{"egress": tooMany})
	cases := []struct {
		name, cap, body string
		code            wire.Code
		says            string
	}{
		{"no cap", "", `{"egress":["api.example.com"]}`, wire.CodeNotAllowed, "does not let threads ask"},
		{"bad host", ".example.com", `{"egress":["exa mple.com"]}`, wire.CodeBadMessage, "exa mple.com"},
		{"bad port", ".example.com", `{"egress":["api.example.com:0"]}`, wire.CodeBadMessage, "port"},
		{"numeric name", ".example.com", `{"egress":["0x7f.1:80"]}`, wire.CodeBadMessage, "numeric"},
		{"outside cap", ".example.com", `{"egress":["api.example.com","evil.test"]}`, wire.CodeNotAllowed, `"evil.test" is outside`},
		{"suffix wider than cap", "api.example.com", `{"egress":[".example.com"]}`, wire.CodeNotAllowed, "outside"},
		{"port outside cap", ".example.com:443", `{"egress":["api.example.com:8443"]}`, wire.CodeNotAllowed, "outside"},
		{"ip outside cap", "127.0.0.1:8080", `{"egress":["127.0.0.1:8081"]}`, wire.CodeNotAllowed, "outside"},
		{"too many", ".example.com", string(many), wire.CodeBadMessage, "at most 64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = splitRules(tc.cap) })
			code, _, werr := e.createThread(tc.body)
			if code != http.StatusBadRequest || werr.Code != tc.code || !strings.Contains(werr.Message, tc.says) {
				t.Fatalf("got %d %+v, want 400 %s saying %q", code, werr, tc.code, tc.says)
			}
			if _, specs, _, _ := e.mgr.State(); len(specs) != 0 {
				t.Fatalf("%d sandboxes created for a refused request", len(specs))
			}
		})
	}
}

// TestThreadEgressPerSandbox: two threads with different rules each reach
// only their own loopback server through their own proxy; a thread with
// no rules is refused with a body that says so; every decision is an
// egress event of the thread; the threads API shows the rules.
func TestThreadEgressPerSandbox(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b} })
	_, ta, _ := e.createThread(`{"egress":["` + a + `"]}`)
	_, tb, _ := e.createThread(`{"egress":["` + b + `", "` + b + `"]}`)
	_, tn, _ := e.createThread(`{}`)
	if !slices.Equal(ta.Egress, []string{a}) || !slices.Equal(tb.Egress, []string{b}) || tn.Egress != nil {
		t.Fatalf("rules in the API: %v %v %v", ta.Egress, tb.Egress, tn.Egress)
	}
	if got := e.threadInfo(tb.ID).Egress; !slices.Equal(got, []string{b}) {
		t.Fatalf("GET shows %v", got)
	}
	s, _ := e.attach(ta.ID, 0)
	cases := []struct {
		thread, target string
		status         int
		body           string
	}{
		{ta.ID, a, 200, "A at /x"},
		{ta.ID, b, 403, "boxwire egress: refused: no egress rule allows " + b},
		{tb.ID, b, 200, "B at /x"},
		{tb.ID, a, 403, "boxwire egress: refused: no egress rule allows " + a},
		{tn.ID, a, 403, "this sandbox has no egress rules"},
	}
	for _, tc := range cases {
		dir := e.socketDir(e.threadInfo(tc.thread).SandboxID)
		status, body := viaEgress(t, dir, tc.target)
		if status != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("thread %s to %s: %d %q, want %d %q", tc.thread, tc.target, status, body, tc.status, tc.body)
		}
	}
	for _, want := range []wire.EgressDecision{ // thread A's decisions only, in order
		{Method: "GET", Host: "127.0.0.1", Port: port(t, a), Allowed: true, Rule: a},
		{Method: "GET", Host: "127.0.0.1", Port: port(t, b), Reason: "no egress rule allows " + b},
	} {
		env := s.read()
		for env.Type != wire.TypeEgress {
			env = s.read()
		}
		var got wire.EgressDecision
		if err := env.Decode(&got); err != nil || got != want || env.Thread != ta.ID {
			t.Errorf("egress event %s %+v, want %+v on %s", env.Thread, got, want, ta.ID)
		}
	}
}

func port(t *testing.T, hostPort string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(p, &n)
	return n
}

func splitRules(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// TestThreadEgressAssistantScope: the first thread of an assistant fixes
// its sandbox's rules; a later thread may ask for the same ones (in any
// spelling) or none, and is refused when it asks for others.
func TestThreadEgressAssistantScope(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{".example.com"} })
	cases := []struct {
		egress string
		status int
		shows  []string
	}{
		{`["api.example.com", "pypi.example.com:443"]`, 201, []string{"api.example.com", "pypi.example.com:443"}},
		{`["PyPI.example.com.:443", "api.example.com"]`, 201, []string{"api.example.com", "pypi.example.com:443"}},
		{`[]`, 201, []string{"api.example.com", "pypi.example.com:443"}},
		{`["api.example.com"]`, 400, nil},
	}
	var box string
	for i, tc := range cases {
		code, info, werr := e.createThread(`{"scope":"assistant","assistant":"helper","egress":` + tc.egress + `}`)
		if code != tc.status {
			t.Fatalf("case %d: %d %+v, want %d", i, code, werr, tc.status)
		}
		if code != 201 {
			if werr.Code != wire.CodeNotAllowed || !strings.Contains(werr.Message, "fixed by its first thread") {
				t.Fatalf("case %d: refused with %+v", i, werr)
			}
			continue
		}
		if !slices.Equal(info.Egress, tc.shows) {
			t.Fatalf("case %d: egress %v, want %v", i, info.Egress, tc.shows)
		}
		if box == "" {
			box = info.SandboxID
		} else if info.SandboxID != box {
			t.Fatalf("case %d: sandbox %s, want the shared %s", i, info.SandboxID, box)
		}
	}
}

// TestThreadEgressFromPool: a thread that takes a warm-pool sandbox gets
// its rules at the claim; the pooled sandbox had the proxy from the start.
func TestThreadEgressFromPool(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	e := newEnvWith(t, func(c *server.Config) { c.Pool, c.EgressThreadMax = 1, []string{a, b} })
	spec := e.awaitPooled(1)[0]
	if envValue(spec.Env, "BOXWIRE_EGRESS_SOCKET") == "" {
		t.Fatalf("pooled sandbox without the egress socket: %v", spec.Env)
	}
	_, info, werr := e.createThread(`{"egress":["` + a + `"]}`)
	if info.SandboxID != e.sandboxIDOf(spec) || !slices.Equal(info.Egress, []string{a}) {
		t.Fatalf("thread %+v (%+v) did not take the pooled sandbox %s with its rule", info, werr, spec.Name)
	}
	dir := e.socketDir(info.SandboxID)
	if status, body := viaEgress(t, dir, a); status != 200 || body != "A at /x" {
		t.Fatalf("own rule: %d %q", status, body)
	}
	if status, _ := viaEgress(t, dir, b); status != 403 {
		t.Fatalf("other host: %d, want 403", status)
	}
}

// TestThreadEgressKeptAcrossRestart: a restarted bridge adopts the
// sandboxes with the rules in the store file; a rule the new cap no longer
// covers is dropped.
func TestThreadEgressKeptAcrossRestart(t *testing.T) {
	a, b := loopbackServer(t, "A"), loopbackServer(t, "B")
	var cfg server.Config
	e := newEnvWith(t, func(c *server.Config) { c.EgressThreadMax = []string{a, b}; cfg = *c })
	_, ta, _ := e.createThread(`{"egress":["` + a + `"]}`)
	_, tb, _ := e.createThread(`{"egress":["` + b + `"]}`)

	restart := func(max ...string) {
		cfg.EgressThreadMax = max
		e.restart(cfg, nil)
	}
	restart(a) // b is no longer allowed to threads

	if got := e.threadInfo(ta.ID); !slices.Equal(got.Egress, []string{a}) || got.SandboxID != ta.SandboxID {
		t.Fatalf("after restart thread A: %+v", got)
	}
	if status, body := viaEgress(t, e.socketDir(ta.SandboxID), a); status != 200 || body != "A at /x" {
		t.Fatalf("thread A after restart: %d %q", status, body)
	}
	if got := e.threadInfo(tb.ID).Egress; got != nil {
		t.Fatalf("thread B keeps %v outside the new cap", got)
	}
	if status, _ := viaEgress(t, e.socketDir(tb.SandboxID), b); status != 403 {
		t.Fatalf("thread B after restart: %d, want 403", status)
	}
	if !strings.Contains(e.logs.String(), "outside the bridge's thread cap now") {
		t.Fatal("the dropped rule was not logged")
	}
	restart(a, b) // the record says what held: a dropped rule does not come back
	if got := e.threadInfo(tb.ID).Egress; got != nil {
		t.Fatalf("thread B got %v back", got)
	}
	if got := e.threadInfo(ta.ID).Egress; !slices.Equal(got, []string{a}) {
		t.Fatalf("thread A after the second restart: %v", got)
	}
}
