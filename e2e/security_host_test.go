package e2e_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// TestSecurityHost plays a hostile model inside a sandbox that tries to
// turn the bridge (root on the host) against the host, under runc and
// under gVisor's runsc: links planted where the bridge writes, links
// swapped under the agent socket's name through bridge restarts, filling
// every place the sandbox can write, and reading or patching the agent's
// memory and environment. Each case fails on a bridge that writes or
// dials by name in a folder the sandbox can write, or keeps a secret in
// the sandbox's environment.
func TestSecurityHost(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "runsc" {
				ensureRunsc(t) // engine_test.go
			}
			hostBoundary(t, rt)
		})
	}
}

// hostTarget is what a hostile sandbox aims at on the host: a root-only
// file and a host unix socket that counts who connects.
type hostTarget struct {
	file, sock string
	accepted   atomic.Int64
}

const canaryText = "root's own file\n"

func newHostTarget(t *testing.T) *hostTarget {
	t.Helper()
	dir := t.TempDir()
	h := &hostTarget{file: filepath.Join(dir, "canary"), sock: filepath.Join(dir, "host.sock")}
	if err := os.WriteFile(h.file, []byte(canaryText), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			c.Close()
		}
	}()
	return h
}

// check fails the test if the host file changed (content or mode) or the
// host socket was connected to.
func (h *hostTarget) check(t *testing.T, when string) {
	t.Helper()
	b, err := os.ReadFile(h.file)
	fi, serr := os.Stat(h.file)
	if err != nil || serr != nil || string(b) != canaryText || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: the host file changed: %q mode %v (%v %v)", when, b, fi.Mode().Perm(), err, serr)
	}
	if n := h.accepted.Load(); n != 0 {
		t.Errorf("%s: the bridge connected %d times to a host socket a sandbox linked to", when, n)
	}
}

func hostBoundary(t *testing.T, rt string) {
	h := newHostTarget(t)
	pol := filepath.Join(t.TempDir(), "policy.json")
	// A credential makes the bridge write the egress CA certificate into
	// every sandbox's folder, at creation and at adoption.
	if err := os.WriteFile(pol, []byte(`{"credentials":[{"name":"c","host":"127.0.0.1:9","value_env":"E2E_SECRET"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"BOXWIRE_POLICY=" + pol, "E2E_SECRET=s3cret-" + randHex(4)}
	req := wire.CreateThread{}
	if rt == "runsc" {
		env = append(env, "BOXWIRE_RUNTIMES=runsc")
		req.Runtime = "runsc"
	}
	e := newEnv(t, helloScript)
	e.startBridge(env...)
	e.cleanAtEnd()
	info := e.createThread(req)
	s := e.dial(info.ID)

	t.Run("the bridge folder is read-only to the sandbox", func(t *testing.T) {
		out := s.sh(`cd /run/boxwire; ls -la; for f in ca.pem llm.sock egress.sock new; do `+
			`rm -f $f; ln -sfn `+h.file+` $f; echo x > $f; done 2>&1; mv ca.pem x 2>&1; echo ---; ls -la`, 30).Output
		t.Logf("%s", out)
		if !strings.Contains(out, "Read-only file system") {
			t.Errorf("no write refused in /run/boxwire")
		}
		_, listing, _ := strings.Cut(out, "---")
		for _, line := range strings.Split(listing, "\n") {
			f := strings.Fields(line)
			if strings.Contains(line, " -> ") || len(f) > 0 && (f[len(f)-1] == "new" || f[len(f)-1] == "x") {
				t.Errorf("the sandbox made %q in /run/boxwire", line)
			}
		}
		h.check(t, "after writes in /run/boxwire")
	})

	t.Run("every place the sandbox writes is capped", func(t *testing.T) {
		out := s.sh(`cd /run/boxwire-agent; head -c 64M /dev/zero > fill; echo "rc=$?"; stat -c 'size=%s' fill; rm -f fill; `+
			`n=0; for i in $(seq 1 500); do : > f$i 2>/dev/null || break; n=$i; done; echo "files=$n"; rm -f f*; `+
			`head -c 1M /dev/zero > /run/boxwire/fill 2>&1; df -k /run/boxwire-agent | tail -1`, 60).Output
		t.Logf("%s", out)
		if !strings.Contains(out, "No space left on device") {
			t.Errorf("filling the agent folder did not run out of space")
		}
		if size := between(out, "size=", "\n"); len(size) > 6 { // ≥ 1 MB
			t.Errorf("the agent folder took %s bytes", size)
		}
		if files := between(out, "files=", "\n"); files == "500" {
			t.Errorf("the agent folder took 500 files")
		}
		if _, done := s.turn("hello"); done.Reason != wire.ReasonStop { // the agent still works
			t.Errorf("turn after filling ended %q", done.Reason)
		}
	})

	t.Run("commands cannot read or write the agent", func(t *testing.T) {
		tokens := e.llmTokens(info.ID) // llmtoken_test.go: found in the agent's memory from the host
		if len(tokens) == 0 {
			t.Fatal("no accepted LLM token found in the agent")
		}
		token := tokens[0]
		out := s.sh(`pid=$(pgrep -x boxwire-agent); echo "agent=$pid"; `+
			`cat /proc/$pid/environ >/dev/null && echo "environ readable"; `+
			`python3 -c "open('/proc/$pid/mem','r+b')" 2>/dev/null && echo "mem open"; `+
			`python3 -c "open('/proc/$pid/maps').read()" 2>/dev/null && echo "maps readable"; `+
			`echo "pid1_token=$(tr '\0' '\n' </proc/1/environ | grep -c BOXWIRE_LLM_TOKEN)"; `+
			`grep -lsa '`+token+`' /proc/[0-9]*/environ /proc/[0-9]*/cmdline && echo "token found"; echo end`, 30).Output
		t.Logf("%s", out)
		if between(out, "agent=", "\n") == "" {
			t.Fatal("no agent process seen")
		}
		bads := []string{"environ readable", "mem open", "maps readable", "token found"}
		if rt == "runsc" {
			// gVisor's own /proc (this Debian build) lets the same user
			// read a non-dumpable process's environ and maps, though not
			// open its mem. Neither holds a secret: the token is not in
			// any environment (checked here), and the memory stays closed.
			bads = []string{"mem open", "token found"}
		}
		for _, bad := range bads {
			if strings.Contains(out, bad) {
				t.Errorf("a command could: %s", bad)
			}
		}
		if n := between(out, "pid1_token=", "\n"); n != "0" {
			t.Errorf("PID 1's environment names BOXWIRE_LLM_TOKEN (%s)", n)
		}
		// And the agent does have its token: the model answers.
		if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
			t.Errorf("turn ended %q: the agent has no working LLM token", done.Reason)
		}
	})

	t.Run("links swapped under the agent socket through bridge restarts", func(t *testing.T) {
		hostile := `cd /run/boxwire-agent && ln -sfn ` + h.sock + ` lnk && while :; do ` +
			`ln -f agent.sock keep 2>/dev/null; cp -P lnk l2; mv -fT l2 agent.sock; sleep 0.002; mv -fT keep agent.sock; ` +
			`ln -sfn ` + h.file + ` /run/boxwire/ca.pem 2>/dev/null; ln -sfn ` + h.file + ` /run/boxwire/llm.sock 2>/dev/null; done`
		out := s.sh(`setsid -f bash -c '`+hostile+`' >/dev/null 2>&1 </dev/null; sleep 0.5; echo "lnk -> $(readlink /run/boxwire-agent/lnk)"; pgrep -c -f "ln -sfn"`, 30).Output
		t.Logf("%s", out)
		if !strings.Contains(out, "lnk -> "+h.sock) {
			t.Fatalf("the hostile loop did not start")
		}
		for i := range 3 {
			if err := e.bridge.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-e.bridge.done
			e.startBridge(env...)
			waitHealthy(t, e)
			h.check(t, "after restart "+string(rune('1'+i)))
		}
		// Whether the bridge adopted the sandbox or replaced it, the
		// thread goes on.
		if _, done := e.dial(info.ID).turn("hello"); done.Reason != wire.ReasonStop {
			t.Errorf("turn after the restarts ended %q", done.Reason)
		}
		h.check(t, "at the end")
	})
}

// between is the text of s after the first from, up to the next to.
func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return strings.TrimSpace(v)
}

// waitHealthy waits until the bridge answers /healthz.
func waitHealthy(t *testing.T, e *env) {
	t.Helper()
	waitFor(t, "the bridge to answer", func() bool {
		resp, err := http.Get(e.bridge.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestSecurityAbandonedCreation: clients that say hello for a new thread
// and hang up at once leave no thread or sandbox behind, and do not use up
// the sandbox limit for the next client.
func TestSecurityAbandonedCreation(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_MAX_SANDBOXES=5")
	e.cleanAtEnd()
	url := "ws" + strings.TrimPrefix(e.bridge.url, "http") + wire.Path
	hdr := http.Header{"Authorization": {"Bearer " + e.token}}
	hello := wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{Version: wire.Version, Role: wire.RoleClient})
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := websocket.DefaultDialer.Dial(url, hdr)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			if err := c.WriteJSON(hello); err != nil {
				t.Errorf("hello: %v", err)
			}
			c.Close()
		}()
	}
	wg.Wait()
	// Every hello ends in the log ("attach client" with its error: the
	// limit, or a creation cancelled by the hangup) before what they made
	// is counted; counting earlier could pass before a sandbox was made.
	waitFor(t, "every abandoned hello to end", func() bool {
		return strings.Count(e.bridge.logText(), `"msg":"attach client"`) >= 30
	})
	waitFor(t, "the abandoned creations to leave nothing", func() bool {
		var list struct {
			Threads []wire.ThreadInfo `json:"threads"`
		}
		e.api(http.MethodGet, "/v1/threads", nil, &list)
		return len(e.containers(nil)) == 0 && len(list.Threads) == 0
	})
	if _, done := e.dial("").turn("hello"); done.Reason != wire.ReasonStop {
		t.Fatalf("a new client's turn ended %q", done.Reason)
	}
}
