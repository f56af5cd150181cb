package e2e_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Fault injection (issue 6): every case counts the thread's events by seq
// across reconnects and asserts that none is missing or duplicated.

const faultsScript = `{"model":"scripted","turns":[
  {"when":"remember","steps":[{"content":"Noted: the number is 42."}]},
  {"when":"which number","steps":[{"content":"It was 42."}]},
  {"steps":[{"content":"ok"}]}
]}`

// linesCmd prints "line 1" … "line n", pausing between lines.
func linesCmd(n int, pause string) map[string]any {
	return map[string]any{"command": "for i in $(seq 1 " + itoa(n) + "); do echo line $i; sleep " + pause + "; done", "timeout": 300}
}

// A client dropped mid-stream (no close frame) reconnects with the last seq
// it saw and gets the rest of the command's output: no gap, no duplicate.
func TestFaultClientDroppedMidStreamResumes(t *testing.T) {
	e := newEnv(t, faultsScript)
	e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	id := w.run(t, "execute", linesCmd(300, "0.01"))
	book.await(t, "streamed output", eventTimeout, func(ev wire.Envelope) bool {
		return ev.Type == wire.TypeToolOutput && strings.Contains(outputOf(book.events(), id), "line 21")
	})
	w.drop()
	after := book.last()
	e.watch(w.thread, after, book)
	book.await(t, "tool_result", turnTimeout, isType(wire.TypeToolResult, id))
	top := book.check(t)
	countLines(t, outputOf(book.events(), id), 300)
	t.Logf("dropped after seq %d; resumed to seq %d", after, top)
}

// The sandbox dies while a command runs — killed by the engine, or its
// agent process killed inside — and the client is told within 3 s; the
// bridge replaces the sandbox, the next turn works, and the model is sent
// the conversation from before.
func TestFaultSandboxDiesDuringCommand(t *testing.T) {
	cases := []struct {
		name string
		kill func(t *testing.T, container string)
	}{
		{"docker kill", func(t *testing.T, c string) {
			out, err := exec.Command("docker", "kill", "-s", "KILL", c).CombinedOutput()
			if err != nil {
				t.Fatalf("docker kill: %v %s", err, out)
			}
		}},
		{"kill -9 of the agent inside", func(t *testing.T, c string) {
			// The exec may end with the container: its error is not the test's.
			out, err := exec.Command("docker", "exec", c, "pkill", "-KILL", "-x", "boxwire-agent").CombinedOutput()
			t.Logf("docker exec pkill: err=%v out=%q", err, out)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, faultsScript)
			e.startBridge()
			e.cleanAtEnd()
			s := e.dial("")
			thread := s.conn.Thread()
			if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
				t.Fatalf("first turn ended %q", done.Reason)
			}
			book := newSeqBook()
			w := e.watch(thread, 0, book)
			id := w.run(t, "execute", map[string]any{"command": "echo started; sleep 120", "timeout": 300})
			book.await(t, "the command's start", eventTimeout, func(ev wire.Envelope) bool {
				return strings.Contains(outputOf(book.events(), id), "started")
			})
			old := e.containerOf(thread)
			start := time.Now()
			tc.kill(t, old)
			ev := book.await(t, "sandbox_exited or sandbox_replaced", eventTimeout, func(ev wire.Envelope) bool {
				return ev.Type == wire.TypeSandboxExited || ev.Type == wire.TypeSandboxReplaced
			})
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("%s came %v after the kill, want within 3s", ev.Type, took)
			}
			var rep wire.SandboxReplaced
			mustDecode(t, book.await(t, "sandbox_replaced", turnTimeout, isType(wire.TypeSandboxReplaced, "")), &rep)
			if rep.SandboxID == "" || strings.HasPrefix(old, rep.SandboxID) || rep.Restored == 0 {
				t.Errorf("sandbox_replaced %+v (old sandbox %s)", rep, old)
			}
			if _, done := s.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
				t.Fatalf("turn after the replacement ended %q", done.Reason)
			}
			if ok, msgs := e.rememberedIn("remember the number 42", "Noted: the number is 42."); !ok {
				t.Errorf("the model was not sent the earlier conversation; last request: %s", msgs)
			}
			book.await(t, "the last turn's turn_done", eventTimeout, func(wire.Envelope) bool { // the first turn's is in the book too
				n := 0
				for _, ev := range book.events() {
					if ev.Type == wire.TypeTurnDone {
						n++
					}
				}
				return n >= 2
			})
			top := book.check(t)
			t.Logf("%s: told by %s; replaced with %s restoring %d events; seqs 1..%d", tc.name, ev.Type, rep.SandboxID, rep.Restored, top)
		})
	}
}

// kill -9 of the bridge while a command streams, then a restart on the same
// data folder: the thread, its log and its sandbox are adopted, and the
// client that resumes with its last seq gets the rest with no gap or
// duplicate; the export holds exactly the same seqs.
func TestFaultBridgeKilledMidStream(t *testing.T) {
	e := newEnv(t, faultsScript)
	b := e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	const n = 400
	id := w.run(t, "execute", linesCmd(n, "0.02"))
	book.await(t, "streamed output", eventTimeout, func(wire.Envelope) bool {
		return strings.Contains(outputOf(book.events(), id), "line 31")
	})
	before := e.containerOf(w.thread)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.done
	w.close()
	after := book.last()

	e.startBridge()
	if got := e.containerOf(w.thread); got != before {
		t.Fatalf("sandbox after restart %s, want the adopted %s", got, before)
	}
	var info wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+w.thread, nil, &info); code != http.StatusOK {
		t.Fatalf("thread after restart: %d", code)
	}
	e.watch(w.thread, after, book)
	var res wire.ToolResult
	mustDecode(t, book.await(t, "tool_result", turnTimeout, isType(wire.TypeToolResult, id)), &res)
	top := book.check(t)
	if exitCode(res) != 0 {
		t.Errorf("command result %+v", res)
	}
	// The agent's backlog replays what it printed while no bridge held it
	// (docs/resume.md): every line arrives exactly once, in order.
	countLines(t, outputOf(book.events(), id), n)
	if res.OutputPath != "" {
		countLines(t, dockerExec(t, before, "cat", res.OutputPath), n)
	}
	if ev, lost := find(book.events(), isType(wire.TypeEventsLost, "")); lost {
		t.Errorf("events lost across the restart: %s", ev.Data)
	}
	exported := e.exportSeqs(w.thread)
	if len(exported) != int(top) || exported[0] != 1 || exported[len(exported)-1] != top {
		t.Errorf("export has %d events (%v…), want seqs 1..%d", len(exported), exported[:min(3, len(exported))], top)
	}
	t.Logf("killed after seq %d; resumed to %d; streamed %d of %d lines", after, top,
		strings.Count(outputOf(book.events(), id), "line "), n)
}

// A client that never reads while a command floods output does not grow
// the bridge's memory without bound, and another client on the thread
// keeps its pings answered.
func TestFaultNonReadingClientDuringFlood(t *testing.T) {
	e := newEnv(t, faultsScript)
	b := e.startBridge()
	e.cleanAtEnd()
	book := newSeqBook()
	w := e.watch("", 0, book)
	thread := w.thread
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	stuck, _, err := chat.DialWebSocket(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close() // never read
	other := e.dial(thread)
	drained := make(chan struct{}) // other reads its events; pings go apart
	go func() {
		defer close(drained)
		for range other.conn.Events() {
		}
	}()
	defer func() {
		other.conn.Close()
		select {
		case <-drained:
		case <-time.After(eventTimeout):
			t.Error("other client's events did not end after Close")
		}
	}()
	rss0, _ := b.rss(t)
	pings := watchPings(other, 200*time.Millisecond)

	// The race-built bridge stores a few hundred KiB/s here: keep the flood
	// small and judge the second half, past the tail's fixed cost.
	const flood = 32 << 20
	began := time.Now()
	id := w.run(t, "execute", map[string]any{
		"command": "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c " + itoa(flood),
		"timeout": 600})
	var peak, mid int64
	var res wire.ToolResult
	wait := 10 * turnTimeout
	deadline := time.Now().Add(wait)
	for {
		rss, _ := b.rss(t)
		peak = max(peak, rss)
		if mid == 0 && book.outBytes() >= flood/2 {
			mid = rss
		}
		if ev, ok := find(book.events(), isType(wire.TypeToolResult, id)); ok {
			mustDecode(t, ev, &res)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool_result within %v (last seq %d, %d bytes)", wait, book.last(), book.outBytes())
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(began)
	slowest, answered, fails := pings.stop()
	top := book.check(t)
	// The PTY streams "\r\n" for each "\n": more bytes than the file. A
	// watcher that fell behind the bridge's in-memory tail (a loaded
	// machine) is served from the store, which keeps only the first
	// MaxStoredOutput bytes of a call and says so in the output: that is
	// the one honest way to see less.
	if res.TotalBytes != flood || book.outBytes() < flood && !sawStoreCap(book.events(), id) {
		t.Errorf("tool_result total_bytes %d, streamed %d, want %d (and no store-cap marker)", res.TotalBytes, book.outBytes(), flood)
	}
	// Bounded: a per-client queue for the stuck client would grow by the
	// second half of the flood (16 MiB, more as JSON events), which the
	// Go heap, with its target of twice what is live, shows as well over
	// 16 MiB of RSS; the tail and store cost is paid in the first half.
	// The collector's own swing in the second half was up to 9 MiB (a
	// clean-clone make test beside other work: 116 MiB at half, peak 125).
	if grew := peak - mid; mid == 0 || grew > flood*3/8 {
		t.Errorf("bridge RSS %d MiB at half the flood, peak %d MiB (from %d MiB)", mid>>20, peak>>20, rss0>>20)
	}
	if len(fails) > 0 || answered == 0 {
		t.Errorf("other client's pings: %d answered, failures %v", answered, fails)
	}
	// Containment, not a benchmark: the agent sends replies ahead of its
	// queued output, so a pong does not wait behind the flood. A pong
	// held behind it would wait for much of the flood; on a machine
	// loaded enough to stretch the flood, every ping is slower too, so
	// the bound grows with the flood's time (3 s when it takes a minute
	// or less; a clean-clone make test beside other work once took
	// 260 s for it, its slowest ping 3.3 s).
	if bound := max(3*time.Second, took/20); slowest > bound {
		t.Errorf("other client's slowest ping took %v during the %v flood, want under %v", slowest, took.Round(time.Second), bound)
	}
	t.Logf("flood %d MiB in seqs 1..%d, %v; bridge RSS %d MiB, %d MiB at half, peak %d MiB; other client: %d pings, slowest %v",
		flood>>20, top, took.Round(time.Second), rss0>>20, mid>>20, peak>>20, answered, slowest)
}

// sawStoreCap reports whether the call id's output carried the store's
// marker for output past what the thread log keeps.
func sawStoreCap(events []wire.Envelope, id string) bool {
	for _, ev := range events {
		var out wire.ToolOutput
		if ev.Type == wire.TypeToolOutput && ev.ID == id && ev.Decode(&out) == nil &&
			strings.Contains(out.Output, "is not kept in the thread log") {
			return true
		}
	}
	return false
}
