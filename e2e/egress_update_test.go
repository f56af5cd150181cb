package e2e_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// TestEgressUpdate runs a bridge that lets threads ask for egress to one
// loopback test server and changes a running thread's rules with the
// client's SetEgress (PATCH /v1/threads/{id}): the sandbox's proxy refuses
// the server before the change, reaches it from the next request on, keeps
// the rule across a kill -9 and a restart (adoption), and refuses it again
// once the rules are cleared; each change is an egress_rules event on the
// thread, kept in its log. Rules outside the cap, rules that do not parse and unknown
// threads are refused.
func TestEgressUpdate(t *testing.T) {
	serve := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s server at %s", name, r.URL.Path)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	a, c := serve("A"), serve("C")
	bridgeEnv := "BOXWIRE_EGRESS_THREAD_MAX=" + a
	e := newEnv(t, helloScript)
	e.startBridge(bridgeEnv)
	e.cleanAtEnd()

	info := e.createThread(wire.CreateThread{})
	s := e.dial(info.ID)
	reached := "HTTP " + a + " 200 A server at /p"
	refused := "HTTP " + a + " 403 boxwire egress: refused: no egress rule allows " + a
	probe := func(when, want string) {
		t.Helper()
		out, _ := s.probeEgress(a)
		t.Logf("%s:\n%s", when, out)
		if !strings.Contains(out, want) {
			t.Fatalf("%s: probe lacks %q:\n%s", when, want, out)
		}
	}
	probe("before the change", refused)

	for _, tc := range []struct {
		thread string
		rules  []string
		code   wire.Code
	}{{info.ID, []string{a, c}, wire.CodeNotAllowed}, {info.ID, []string{"exa mple.com"}, wire.CodeBadMessage}, {"t_000000000000", []string{a}, wire.CodeNotFound}} {
		_, err := e.setEgress(tc.thread, tc.rules)
		var werr wire.Error
		if !errors.As(err, &werr) || werr.Code != tc.code {
			t.Errorf("set %v on %s: %v, want code %s", tc.rules, tc.thread, err, tc.code)
		}
	}

	if got, err := e.setEgress(info.ID, []string{a}); err != nil || !slices.Equal(got.Egress, []string{a}) {
		t.Fatalf("set [%s]: %+v %v", a, got, err)
	}
	s.awaitEgressRules([]string{a})
	probe("after the change", reached)

	e.bridge.cmd.Process.Signal(syscall.SIGKILL)
	<-e.bridge.done
	e.startBridge(bridgeEnv)
	s = e.dial(info.ID)
	s.awaitEgressRules([]string{a}) // replayed from the thread's log
	probe("after kill -9 and a restart", reached)

	if got, err := e.setEgress(info.ID, nil); err != nil || got.Egress != nil {
		t.Fatalf("clear: %+v %v", got, err)
	}
	s.awaitEgressRules(nil)
	probe("after clearing", refused)
}
