package e2e_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// llmTokens returns the LLM proxy tokens the proxy of the thread's sandbox
// accepts now. The bridge issues them at random and hands them to the
// agent only, so the test finds them where only the host's root can look:
// the agent process's memory (under gVisor, whose sentry hides the agent
// from the host, the bridge's, which issued them), every token-shaped
// string of it tried on the proxy's socket.
func (e *env) llmTokens(thread string) []string {
	e.t.Helper()
	sock := filepath.Join(e.dataDir, "run", thread, "llm.sock")
	var good []string
	start := time.Now()
	cands := e.agentMemoryTokens(thread)
	for _, cand := range cands {
		if unixGet(e.t, sock, "/v1/models", cand) == 200 {
			good = append(good, cand)
		}
	}
	e.t.Logf("the process's memory: %d token-shaped strings, %d accepted (%v)", len(cands), len(good), time.Since(start).Round(time.Millisecond))
	return good
}

// agentMemoryTokens lists the distinct token-shaped strings (64 hex
// digits: 32 random bytes) in the writable memory of the thread's
// sandbox's agent process, or, when the host cannot see that process
// (gVisor runs it inside its sentry), of the bridge process.
func (e *env) agentMemoryTokens(thread string) []string {
	e.t.Helper()
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		e.t.Fatalf("want 1 sandbox for thread %s, have %d", thread, len(boxes))
	}
	out, err := exec.Command("docker", "top", boxes[0].ID, "-eo", "pid,comm").Output()
	if err != nil {
		e.t.Fatalf("list sandbox processes: %v", err)
	}
	pid := ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == "boxwire-agent" {
			pid = f[0]
		}
	}
	if rt, _ := exec.Command("docker", "inspect", "--format", "{{.HostConfig.Runtime}}", boxes[0].ID).Output(); pid == "" && strings.TrimSpace(string(rt)) == "runsc" {
		pid = strconv.Itoa(e.bridge.cmd.Process.Pid)
	}
	if pid == "" {
		e.t.Fatalf("no agent process in sandbox %s:\n%s", boxes[0].ID, out)
	}
	return memoryTokens(e.t, pid)
}

// memoryTokens lists the distinct token-shaped strings in the writable
// memory of process pid (as root on the host).
func memoryTokens(t *testing.T, pid string) []string {
	t.Helper()
	seen := map[string]bool{}
	var found []string
	maps, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	chunk := make([]byte, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") { // the heap, not the binary's text
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil || hi-lo > 1<<30 {
			continue
		}
		run := 0 // hex digits in a row, across chunks
		for off := lo; off < hi; off += uint64(len(chunk)) {
			n, _ := mem.ReadAt(chunk[:min(uint64(len(chunk)), hi-off)], int64(off))
			for i := 0; i < n; i++ {
				if c := chunk[i]; c >= '0' && c <= '9' || c >= 'a' && c <= 'f' {
					run++
					continue
				}
				if run == 64 && i >= 64 {
					if tok := string(chunk[i-64 : i]); !seen[tok] && len(found) < 5000 {
						seen[tok] = true
						found = append(found, tok)
					}
				}
				run = 0
			}
		}
	}
	return found
}

// TestLLMTokenRotation: the sandbox's LLM proxy token expires and is
// rotated while the sandbox lives (a turn longer than three lifetimes still
// reaches the model), an expired token is refused though the sandbox
// lives, and a replaced sandbox's token is refused at once by its
// successor's proxy.
func TestLLMTokenRotation(t *testing.T) {
	t.Run("rotated during a long turn", func(t *testing.T) {
		const ttl = 6 * time.Second
		e := newEnv(t, `{"turns":[{"when":"long","steps":[
			{"tool_calls":[{"id":"s1","name":"execute","arguments":{"command":"sleep 10","timeout":60}}]},
			{"tool_calls":[{"id":"s2","name":"execute","arguments":{"command":"sleep 10","timeout":60}}]},
			{"content":"still here"}]}]}`)
		e.startBridge("BOXWIRE_LLM_TOKEN_TTL=" + ttl.String())
		s := e.dial("")
		first := e.llmTokens(s.conn.Thread())
		if len(first) == 0 {
			t.Fatal("no accepted token found in the agent")
		}
		start := time.Now()
		events, done := s.turn("long")
		if done.Reason != wire.ReasonStop || time.Since(start) < 3*ttl {
			t.Fatalf("turn ended %q after %v: %d events", done.Reason, time.Since(start), len(events))
		}
		if n := strings.Count(e.bridge.logText(), "llm token rotated"); n < 2 {
			t.Errorf("the token was rotated %d times in %v", n, time.Since(start))
		}
		sock := filepath.Join(e.dataDir, "run", s.conn.Thread(), "llm.sock")
		for _, tok := range first {
			if code := unixGet(t, sock, "/v1/models", tok); code != 401 {
				t.Errorf("a token older than its lifetime: %d, want 401", code)
			}
		}
		if now := e.llmTokens(s.conn.Thread()); len(now) == 0 {
			t.Errorf("the agent holds no good token now")
		}
	})

	t.Run("a replaced sandbox's token is refused", func(t *testing.T) {
		e := newEnv(t, helloScript)
		e.startBridge() // the default lifetime: only the replacement ends the token
		s := e.dial("")
		thread := s.conn.Thread()
		old := e.llmTokens(thread)
		if len(old) == 0 {
			t.Fatal("no accepted token found in the agent")
		}
		boxes := e.containers(map[string]string{"boxwire.thread": thread})
		if out, err := exec.Command("docker", "kill", boxes[0].ID).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
		s.awaitEvent(wire.TypeSandboxReplaced) // whatever it is reported as (a kill looks like an OOM)
		sock := filepath.Join(e.dataDir, "run", thread, "llm.sock")
		for _, tok := range old {
			if code := unixGet(t, sock, "/v1/models", tok); code != 401 {
				t.Errorf("the replaced sandbox's token on its successor's proxy: %d, want 401", code)
			}
		}
		testutil.Eventually(t, "the new agent holds a good token", eventTimeout, func() bool {
			return len(e.llmTokens(thread)) > 0
		})
		if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
			t.Errorf("turn in the new sandbox ended %q", done.Reason)
		}
	})
}
