package kube_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// egressProbe fetches http://HOST:PORT/x for each argument through the
// proxy the agent exposes, and once directly (no proxy).
const egressProbe = `import os, sys, urllib.request
for hp in sys.argv[1:]:
    try:
        print("GOT", hp, urllib.request.urlopen("http://" + hp + "/x", timeout=30).read().decode())
    except Exception as e:
        print("ERR", hp, e)
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open("http://" + sys.argv[1] + "/x", timeout=5)
    print("DIRECT reached")
except Exception as e:
    print("DIRECT failed", e)
`

// Egress from a pod goes only through the bridge's egress proxy, over the
// relay: an allowed host answers, another is refused by the proxy (403),
// and without the proxy nothing is reached (the pod has no route).
func TestKubeEgressAllowedAndDenied(t *testing.T) {
	serve := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s server", name)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	allowed, denied := serve("allowed"), serve("denied")
	command := "NO_PROXY= no_proxy= python3 - " + allowed + " " + denied + " <<'PY'\n" + egressProbe + "PY"
	args, err := json.Marshal(map[string]any{"command": command, "timeout": 90})
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`{"model":"scripted","turns":[{"when":"probe","steps":[
  {"content":"Probing.","tool_calls":[{"name":"execute","arguments":%s}]},
  {"content":"Probed."}]},
  {"steps":[{"content":"I only know scripted answers."}]}]}`, args)
	e := newEnv(t, script)
	e.env = append(e.env, "BOXWIRE_EGRESS_ALLOW="+allowed)
	e.startBridge()
	s := e.dial("")
	events, done := s.turn("probe the network")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	out, _ := toolOutput(t, events)
	out = strings.ReplaceAll(out, "\r", "")
	for _, want := range []string{"GOT " + allowed + " allowed server", "ERR " + denied + " HTTP Error 403", "DIRECT failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
}
