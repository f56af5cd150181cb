package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// sleepScript runs a command that only an interrupt ends.
const sleepScript = `{"model":"scripted","turns":[
  {"when":"sleep","steps":[
    {"content":"Sleeping.","tool_calls":[{"name":"execute","arguments":{"command":"echo started; sleep 600"}}]},
    {"content":"Woke up."}
  ]},
  {"when":"count","steps":[
    {"content":"Counting.","tool_calls":[{"name":"execute","arguments":{"command":"for i in $(seq 1 40); do echo line$i; sleep 0.1; done"}}]},
    {"content":"Counted."}
  ]},
  {"steps":[{"content":"The file /workspace/x now says hello."}]}
]}`

// The real client on a terminal: a turn renders, Ctrl-C interrupts a long
// execute and the prompt comes back, Ctrl-D leaves with exit code 0.
func TestClientOnTerminal(t *testing.T) {
	e := newEnv(t, sleepScript)
	e.startBridge()
	p := e.startPTY("--url", e.bridge.url)
	p.expect("thread t_", startTimeout)
	p.expect("› ", startTimeout)

	p.send("hello there\r")
	p.expect("The file /workspace/x now says hello.", turnTimeout)
	p.expect("› ", eventTimeout)

	p.send("please sleep\r")
	p.expect("sleep 600", turnTimeout)
	p.expect("started", turnTimeout)
	p.send("\x03") // Ctrl-C: the terminal sends SIGINT
	p.expect("interrupted", turnTimeout)
	p.expect("› ", eventTimeout)

	p.send("/help\r")
	p.expect("/download", eventTimeout)
	p.send("\x04") // Ctrl-D at the prompt
	if code := p.wait(eventTimeout); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// --json prints every event as a JSON line, and -m's exit code says how
// the turn ended.
func TestClientJSONOneShot(t *testing.T) {
	e := newEnv(t, sleepScript)
	e.startBridge()
	out, errOut, code := e.runClient("--url", e.bridge.url, "--json", "-m", "hello")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	envs := jsonLines(t, out)
	if len(envs) < 3 || envs[0].Type != wire.TypeUserEcho || envs[len(envs)-1].Type != wire.TypeTurnDone {
		t.Fatalf("unexpected event sequence: %s", out)
	}
	for i, env := range envs {
		if env.Seq != uint64(i+1) {
			t.Errorf("line %d has seq %d", i, env.Seq)
		}
	}
}

// The connection is cut twice in the middle of a streaming command; the
// client reconnects on its own and prints every line exactly once.
func TestClientResumesAfterCut(t *testing.T) {
	e := newEnv(t, sleepScript)
	e.startBridge()
	proxy := startProxy(t, strings.TrimPrefix(e.bridge.url, "http://"))
	stop := make(chan struct{})
	cutter := make(chan struct{})
	go func() { // cuts twice while the command streams (it runs ~4 s)
		defer close(cutter)
		for range 2 {
			select {
			case <-time.After(2500 * time.Millisecond):
				proxy.cut()
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-cutter }()
	out, errOut, code := e.runClient("--url", "http://"+proxy.addr(), "--json", "-m", "count")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var output strings.Builder
	var last uint64
	for _, env := range jsonLines(t, out) {
		if env.Seq != last+1 {
			t.Errorf("seq %d after %d: a gap or a repeat", env.Seq, last)
		}
		last = env.Seq
		if env.Type == wire.TypeToolOutput {
			var o wire.ToolOutput
			mustDecode(t, env, &o)
			output.WriteString(o.Output)
		}
	}
	for i := 1; i <= 40; i++ {
		line := fmt.Sprintf("line%d\r\n", i)
		if n := strings.Count(output.String(), line); n != 1 {
			t.Errorf("%q printed %d times", line, n)
		}
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.cuts < 1 {
		t.Errorf("the connection was never cut")
	}
}
