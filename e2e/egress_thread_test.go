package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// egressThreadProbe is run with python3 in the sandbox: it fetches
// http://HOST:PORT/p for each argument through the proxy in HTTP_PROXY and
// prints the status and body.
const egressThreadProbe = `
import os, sys, urllib.request, urllib.error
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["HTTP_PROXY"]}))
for hp in sys.argv[1:]:
    try:
        r = opener.open("http://" + hp + "/p", timeout=20)
        print("HTTP", hp, r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print("HTTP", hp, e.code, e.read().decode().strip())
`

// probeEgress runs egressThreadProbe for hostPorts in the session's sandbox
// and returns its output and the egress events that came meanwhile.
func (s *session) probeEgress(hostPorts ...string) (string, []wire.EgressDecision) {
	s.t.Helper()
	run := s.runTool("execute", map[string]any{"timeout": 60,
		"command": "NO_PROXY= no_proxy= python3 - " + strings.Join(hostPorts, " ") + " <<'PY'\n" + egressThreadProbe + "PY"}, turnTimeout)
	var decisions []wire.EgressDecision
	for _, ev := range run.others {
		var d wire.EgressDecision
		if ev.Type == wire.TypeEgress && ev.Decode(&d) == nil {
			decisions = append(decisions, d)
		}
	}
	return strings.ReplaceAll(run.result.Output, "\r", ""), decisions
}

// TestEgressPerThread runs a bridge that lets threads ask for egress to two
// loopback test servers (BOXWIRE_EGRESS_THREAD_MAX) and checks that a
// thread asking for a third, or for a rule that does not parse, is refused
// before anything is created; that two threads with different rules each
// reach only their own server through their own sandbox's proxy, the other
// refused with 403 and an egress event; and that after a kill -9 and a
// restart the adopted sandboxes keep their rules.
func TestEgressPerThread(t *testing.T) {
	serve := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s server at %s", name, r.URL.Path)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	a, b, c := serve("A"), serve("B"), serve("C")
	bridgeEnv := "BOXWIRE_EGRESS_THREAD_MAX=" + a + "," + b
	e := newEnv(t, helloScript)
	e.startBridge(bridgeEnv)
	e.cleanAtEnd()

	for _, tc := range []struct {
		egress []string
		code   wire.Code
	}{{[]string{a, c}, wire.CodeNotAllowed}, {[]string{"exa mple.com"}, wire.CodeBadMessage}} {
		var body apiError
		if status := e.api(http.MethodPost, "/v1/threads", wire.CreateThread{Egress: tc.egress}, &body); status != http.StatusBadRequest || body.Error.Code != tc.code {
			t.Errorf("egress %v: %d %+v, want 400 %s", tc.egress, status, body.Error, tc.code)
		}
	}
	if n := len(e.containers(nil)); n != 0 {
		t.Fatalf("%d sandboxes after refused requests, want 0", n)
	}

	ta := e.createThread(wire.CreateThread{Egress: []string{a}})
	tb := e.createThread(wire.CreateThread{Egress: []string{b}})
	check := func(when string) {
		for _, tc := range []struct{ thread, own, other, name string }{{ta.ID, a, b, "A"}, {tb.ID, b, a, "B"}} {
			s := e.dial(tc.thread)
			out, decisions := s.probeEgress(tc.own, tc.other)
			t.Logf("%s, thread %s:\n%s", when, tc.thread, out)
			for _, want := range []string{"HTTP " + tc.own + " 200 " + tc.name + " server at /p",
				"HTTP " + tc.other + " 403 boxwire egress: refused: no egress rule allows " + tc.other} {
				if !strings.Contains(out, want) {
					t.Errorf("%s, thread %s: probe lacks %q", when, tc.thread, want)
				}
			}
			allowed := slices.ContainsFunc(decisions, func(d wire.EgressDecision) bool {
				return d.Allowed && fmt.Sprintf("%s:%d", d.Host, d.Port) == tc.own && d.Rule == tc.own
			})
			refused := slices.ContainsFunc(decisions, func(d wire.EgressDecision) bool {
				return !d.Allowed && fmt.Sprintf("%s:%d", d.Host, d.Port) == tc.other
			})
			if !allowed || !refused {
				t.Errorf("%s, thread %s: egress events %+v lack the allowed %s or the refused %s", when, tc.thread, decisions, tc.own, tc.other)
			}
			s.conn.Close()
		}
	}
	check("before the restart")

	e.bridge.cmd.Process.Signal(syscall.SIGKILL)
	<-e.bridge.done
	e.startBridge(bridgeEnv)
	var info wire.ThreadInfo
	if status := e.api(http.MethodGet, "/v1/threads/"+ta.ID, nil, &info); status != http.StatusOK || !slices.Equal(info.Egress, []string{a}) {
		t.Fatalf("after the restart GET thread: %d, egress %v, want [%s]", status, info.Egress, a)
	}
	check("after kill -9 and a restart")
}

// TestEgressPerThreadFromPool: with a thread cap every sandbox has the
// egress proxy, so a thread that takes a warm-pool sandbox reaches its own
// server (its rules come with the claim), and a thread that asked for no
// rules is told so in the proxy's 403 body.
func TestEgressPerThreadFromPool(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "A server at %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	a := strings.TrimPrefix(srv.URL, "http://")
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_POOL=1", "BOXWIRE_EGRESS_THREAD_MAX="+a)
	e.cleanAtEnd()
	awaitPoolReady(t, e, 1)
	pooled := e.containers(map[string]string{"boxwire.pool": "1"})
	if len(pooled) != 1 {
		t.Fatalf("pooled containers %+v", pooled)
	}
	info := e.createThread(wire.CreateThread{Egress: []string{a}})
	if info.SandboxID != pooled[0].ID || !slices.Equal(info.Egress, []string{a}) {
		t.Fatalf("thread %+v, want the pooled sandbox %s with egress [%s]", info, pooled[0].ID, a)
	}
	out, _ := e.dial(info.ID).probeEgress(a)
	if want := "HTTP " + a + " 200 A server at /p"; !strings.Contains(out, want) {
		t.Errorf("pooled thread: probe lacks %q:\n%s", want, out)
	}

	awaitPoolReady(t, e, 2)
	none := e.createThread(wire.CreateThread{})
	out, _ = e.dial(none.ID).probeEgress(a)
	if want := "HTTP " + a + " 403 boxwire egress: refused: no egress rule allows " + a + " (this sandbox has no egress rules"; !strings.Contains(out, want) {
		t.Errorf("thread without rules: probe lacks %q:\n%s", want, out)
	}
}
