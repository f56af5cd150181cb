package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// egressProbe is run with python3 in the sandbox: it fetches each URL
// through the proxy in HTTP_PROXY (NO_PROXY names loopback, so the proxy is
// given explicitly and NO_PROXY emptied), opens a CONNECT tunnel to each host:port, and tries a
// direct connection, which only reaches the sandbox's own loopback.
const egressProbe = `
import os, sys, socket, http.client, urllib.request, urllib.error
proxy = os.environ["HTTP_PROXY"]
ph, pp = proxy.removeprefix("http://").split(":")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
for hp in sys.argv[1:]:
    try:
        r = opener.open("http://" + hp + "/plain", timeout=20)
        print("HTTP", hp, r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print("HTTP", hp, e.code, e.read().decode().strip())
    h, p = hp.split(":")
    c = http.client.HTTPConnection(ph, int(pp), timeout=20)
    c.set_tunnel(h, int(p))
    try:
        c.request("GET", "/tunnel")
        r = c.getresponse()
        print("TUNNEL", hp, r.status, r.read().decode())
    except OSError as e:
        print("TUNNEL", hp, "refused", e)
    try:
        socket.create_connection((h, int(p)), timeout=5)
        print("DIRECT", hp, "connected")
    except OSError as e:
        print("DIRECT", hp, "failed", e.errno)
`

// TestSecurityEgress runs a bridge whose egress allowlist names one
// loopback test server on the host and checks, from execute in a real
// sandbox, that the proxy variables are set, that the allowed server is
// reached through the proxy (plain HTTP and CONNECT), that another is
// refused with the proxy's 403 body, that neither is reachable directly,
// and that every decision reaches the client as an egress event.
func TestSecurityEgress(t *testing.T) {
	serve := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s server at %s", name, r.URL.Path)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	allowed, denied := serve("allowed"), serve("denied")
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_EGRESS_ALLOW=" + allowed)
	s := e.dial("")

	env := s.sh("env | grep -i _proxy= | sort", 30).Output
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
		"http_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1"} {
		if !strings.Contains(env, want) {
			t.Errorf("%s not in the command's environment:\n%s", want, env)
		}
	}

	run := s.runTool("execute", map[string]any{"timeout": 60,
		"command": "NO_PROXY= no_proxy= python3 - " + allowed + " " + denied + " <<'PY'\n" + egressProbe + "PY"}, turnTimeout)
	out := strings.ReplaceAll(run.result.Output, "\r", "")
	t.Logf("probe:\n%s", out)
	for _, want := range []string{
		"HTTP " + allowed + " 200 allowed server at /plain",
		"TUNNEL " + allowed + " 200 allowed server at /tunnel",
		"HTTP " + denied + " 403 boxwire egress: refused",
		"TUNNEL " + denied + " refused Tunnel connection failed: 403",
		"DIRECT " + allowed + " failed 111",
		"DIRECT " + denied + " failed 111",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q", want)
		}
	}

	var decisions []wire.EgressDecision
	for _, ev := range run.others {
		if ev.Type == wire.TypeEgress {
			var d wire.EgressDecision
			ev.Decode(&d)
			decisions = append(decisions, d)
		}
	}
	t.Logf("egress events: %+v", decisions)
	for _, want := range []struct {
		method, hostPort string
		allowed          bool
	}{{"GET", allowed, true}, {"CONNECT", allowed, true}, {"GET", denied, false}, {"CONNECT", denied, false}} {
		found := false
		for _, d := range decisions {
			found = found || d.Method == want.method && fmt.Sprintf("%s:%d", d.Host, d.Port) == want.hostPort && d.Allowed == want.allowed
		}
		if !found {
			t.Errorf("no egress event %s %s allowed=%v", want.method, want.hostPort, want.allowed)
		}
	}
}
