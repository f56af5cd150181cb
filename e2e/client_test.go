package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
// client reconnects on its own and prints every line exactly once. The
// cuts follow the client's own --json output (after line5 and line25 were
// printed), not the clock: a cut while the client still makes its first
// connection would end it, and that is not what this test is about.
func TestClientResumesAfterCut(t *testing.T) {
	e := newEnv(t, sleepScript)
	e.startBridge()
	proxy := startProxy(t, strings.TrimPrefix(e.bridge.url, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*turnTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, clientBinary(t), "--url", "http://"+proxy.addr(), "--json", "-m", "count")
	cmd.Env = e.clientEnv()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start client: %v", err)
	}
	var out, streamed strings.Builder
	cutAfter := []string{"line5\r\n", "line25\r\n"}
	sc := bufio.NewScanner(stdout) // read to EOF: the client must not block on its stdout
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		env, err := wire.Parse(sc.Bytes())
		if err != nil || env.Type != wire.TypeToolOutput {
			continue
		}
		var o wire.ToolOutput
		if env.Decode(&o) == nil {
			streamed.WriteString(o.Output)
		}
		if len(cutAfter) > 0 && strings.Contains(streamed.String(), cutAfter[0]) {
			cutAfter = cutAfter[1:]
			proxy.cut()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v: %s\n%s", err, errOut.String(), out.String())
	}
	var output strings.Builder
	var last uint64
	for _, env := range jsonLines(t, out.String()) {
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

// tuiScript answers with markdown, runs a long command, and greets.
const tuiScript = `{"model":"scripted","turns":[
  {"when":"markdown","steps":[
    {"content":"# Plan\nSome **bold words** and ` + "`a span`" + `.\n` + "```" + `\ncode line here\n` + "```" + `\nDone."}
  ]},
  {"when":"long","steps":[
    {"content":"Running.","tool_calls":[{"name":"execute","arguments":{"command":"for i in $(seq 1 60); do echo row$i; done"}}]},
    {"content":"Counted."}
  ]},
  {"steps":[{"content":"Greetings received."}]}
]}`

// The real client on a color terminal: the line editor (typing, backspace,
// arrows, history with Up, kept in a file), a markdown answer, folded tool
// output and /expand, /threads, the status line, and two Ctrl-C to leave.
func TestClientTerminalUI(t *testing.T) {
	e := newEnv(t, tuiScript)
	e.startBridge()
	cfgDir := t.TempDir()
	p := e.startPTYEnv(e.colorEnv(cfgDir), "--url", e.bridge.url)
	p.expect("thread t_", startTimeout)
	p.expect("sandbox running", eventTimeout)
	p.expect("› ", eventTimeout)

	// "hellp", backspace, "o wrld", three lefts, "o": "hello world".
	p.send("hellp\x7fo wrld\x1b[D\x1b[D\x1b[Do\r")
	p.expect("Greetings received.", turnTimeout)
	p.expect("tokens", eventTimeout)
	p.send("\x1b[A") // Up recalls the line
	p.expect("hello world", eventTimeout)
	p.send("\x15/status\r") // ^U erases it
	p.expect("thread t_", eventTimeout)
	hist, err := os.ReadFile(filepath.Join(cfgDir, "boxwire", "history"))
	if err != nil || !strings.Contains(string(hist), "hello world\n") {
		t.Errorf("history file: %q, %v", hist, err)
	}

	p.send("markdown please\r")
	p.expect("Done.", turnTimeout)
	screen := p.screen()
	for _, style := range []string{"\x1b[1;36m", "\x1b[1m", "\x1b[33m"} { // a style cut by chunks
		screen = strings.ReplaceAll(screen, "\x1b[0m"+style, "")
	}
	for _, want := range []string{"\x1b[1;36mPlan", "\x1b[1mbold words", "\x1b[33ma span", "\x1b[33mcode line here"} {
		if !strings.Contains(screen, want) {
			t.Errorf("no %q on the screen", want)
		}
	}
	if strings.Contains(screen, "**bold words**") || strings.Contains(screen, "# Plan") {
		t.Errorf("markdown markers shown on a terminal")
	}

	p.send("long output\r")
	p.expect("for i in $(seq 1 60)", turnTimeout)
	p.expect("lines · /expand 1", turnTimeout)
	p.expect("Counted.", turnTimeout)
	p.send("/expand\r")
	p.expect("#1 execute(", eventTimeout)
	for _, row := range []string{"row1\r", "row30\r", "row60\r"} {
		p.expect(row, eventTimeout)
	}

	p.send("/threads\r")
	p.expect("THREAD", eventTimeout)
	p.expect("* t_", eventTimeout)
	p.expect("running", eventTimeout)

	p.send("\x03") // first Ctrl-C at the prompt only warns
	p.expect("Ctrl-C again", eventTimeout)
	p.send("\x03")
	if code := p.wait(eventTimeout); code != 130 {
		t.Fatalf("exit code %d, want 130", code)
	}
}

// --seed uploads a folder before the chat; /upload and /download move
// files in the chat; the bytes come back identical.
func TestClientSeedUploadDownload(t *testing.T) {
	e := newEnv(t, tuiScript)
	e.startBridge()
	local := t.TempDir()
	seed := filepath.Join(local, "proj")
	if err := os.MkdirAll(filepath.Join(seed, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	files := map[string][]byte{"proj/a.txt": []byte("alpha\n"), "proj/sub/big.bin": big}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(local, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	extra := filepath.Join(local, "notes.md")
	if err := os.WriteFile(extra, []byte("# notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	p := e.startPTY("--url", e.bridge.url, "--seed", seed)
	p.expect("4 entries", startTimeout) // the seed: 2 folders, 2 files
	p.expect("thread t_", eventTimeout)
	p.expect("› ", eventTimeout)
	p.send("/upload " + extra + " docs\r")
	p.expect("entries", eventTimeout)
	p.send("/download proj " + out + "\r")
	p.expect("entries", eventTimeout)
	p.send("/download docs/notes.md " + out + "\r")
	p.expect("entries", eventTimeout)
	for name := range files {
		if !sameFile(filepath.Join(local, name), filepath.Join(out, name)) {
			t.Errorf("%s did not come back identical", name)
		}
	}
	if !sameFile(extra, filepath.Join(out, "notes.md")) {
		t.Errorf("notes.md did not come back identical")
	}
	p.send("\x04")
	if code := p.wait(eventTimeout); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}
