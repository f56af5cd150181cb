package session_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// update rewrites the golden files in bridge/wire/testdata that the real
// agent produces: go test ./agent/session -run TestGoldenAgent -update
var update = flag.Bool("update", false, "rewrite the golden files the agent produces (bridge/wire/testdata)")

// goldenDir is where the protocol's golden examples live.
var goldenDir = filepath.Join("..", "..", "bridge", "wire", "testdata")

// The fixed values volatile fields are replaced with in golden files.
const (
	goldenThread    = "t_4f9c2a1b3c5d"
	goldenInstance  = "a3f09c1d2b7e4f60"
	goldenWorkspace = "/workspace"
	goldenOutputDir = "/tmp/boxwire/output"
)

// recorder reads a connection and keeps the first message of each golden
// name. Seqs are renumbered as if every tool's streamed output had come in
// one tool_output (how a PTY's output is chunked varies from run to run);
// everything else is as the agent sent it, but for the volatile fields
// normalize replaces.
type recorder struct {
	t        *testing.T
	c        *client
	seq      uint64
	lastCall string // call id of the previous tool_output
	got      map[string]wire.Envelope
}

// read returns the next message, renumbered.
func (r *recorder) read() wire.Envelope {
	r.t.Helper()
	env := r.c.next()
	if env.Seq == 0 {
		return env
	}
	var call string
	if env.Type == wire.TypeToolOutput {
		call = decode[wire.ToolOutput](r.t, env).CallID
	}
	if call == "" || call != r.lastCall {
		r.seq++
	}
	r.lastCall = call
	env.Seq = r.seq
	return env
}

// until reads until a message matching want, keeping it as name.
func (r *recorder) until(name string, want func(wire.Envelope) bool) wire.Envelope {
	r.t.Helper()
	for {
		env := r.read()
		if want(env) {
			r.keep(name, env)
			return env
		}
	}
}

func (r *recorder) keep(name string, env wire.Envelope) {
	if _, ok := r.got[name]; !ok {
		r.got[name] = env
	}
}

func isType(typ wire.Type) func(wire.Envelope) bool {
	return func(env wire.Envelope) bool { return env.Type == typ }
}

func resultOf(t *testing.T, callID string) func(wire.Envelope) bool {
	return func(env wire.Envelope) bool {
		return env.Type == wire.TypeToolResult && decode[wire.ToolResult](t, env).CallID == callID
	}
}

func execCall(id, args string) loop.ToolCall {
	return loop.ToolCall{ID: id, Name: "execute", Arguments: args}
}

// TestGoldenAgent runs the real agent — session, tool loop and tools, with
// a scripted model — through turns that produce every message the agent
// sends, and compares each to its golden file in bridge/wire/testdata. A
// difference fails the test; -update rewrites the files.
func TestGoldenAgent(t *testing.T) {
	tmp := t.TempDir()
	workspace, outDir := filepath.Join(tmp, "workspace"), filepath.Join(tmp, "output")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	// A fake memory cgroup (512 MiB) that m7's command counts an OOM kill
	// in, as the kernel would, before it dies of SIGKILL.
	cgroup := filepath.Join(tmp, "cgroup")
	if err := os.MkdirAll(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"memory.events": "oom 0\noom_kill 0\n", "memory.max": "536870912\n"} {
		if err := os.WriteFile(filepath.Join(cgroup, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// HOME is the test's own, so that no login profile of this machine's
	// (a pyenv rehash waiting for its lock) runs in the commands.
	set := tools.New(tools.Config{Workspace: workspace, OutputDir: outDir, OutputLimit: 256, InputIdle: time.Second,
		Env: []string{"HOME=" + tmp}, MemoryCgroup: cgroup})
	t.Cleanup(func() { _ = set.Close() })

	gate, taken := make(chan struct{}), make(chan struct{})
	errTaken := make(chan struct{})
	model := &fakeModel{steps: []step{
		// m1: a command and its streamed output.
		{text: "Let me write it.", calls: []loop.ToolCall{execCall("call_1", `{"command":"echo hello > x && cat x"}`)},
			usage: wire.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}},
		{text: "Done: x says hello.", usage: wire.Usage{PromptTokens: 180, CompletionTokens: 8, TotalTokens: 188}},
		// m2: output over the limit, cut.
		{calls: []loop.ToolCall{execCall("call_2", `{"command":"seq 0 99999"}`)}},
		{text: "It counted to 99999."},
		// m3: a prompt, a refused path, a background job, a timeout.
		{calls: []loop.ToolCall{
			execCall("call_3", `{"command":"read -s -p 'Password: ' pw </dev/tty && echo ok"}`),
			{ID: "call_4", Name: "read_file", Arguments: `{"path":"/etc/passwd"}`},
			execCall("call_5", `{"command":"python3 -m http.server 8000","background":true}`),
			execCall("call_6", `{"command":"sleep 30","timeout":1}`),
		}},
		{text: "It waits for a password."},
		// m4: held until interrupted; m5 is refused meanwhile.
		{gate: gate, taken: taken},
		// m6: the model endpoint fails.
		{err: &loop.EndpointError{StatusCode: 429, Message: "rate limited"}, taken: errTaken},
		// m7: a command the OOM killer ends.
		{calls: []loop.ToolCall{execCall("call_7", `{"command":"printf 'oom 1\\noom_kill 1\\n' > `+
			filepath.Join(cgroup, "memory.events")+`; kill -9 $$"}`)}},
		{text: "It ran out of memory."},
	}}
	e := newEnv(t, session.Config{
		Loop:     loop.Config{Model: model, Tools: set.All(), Workspace: workspace},
		Software: "boxwire-agent/0.1.0",
		Posture: &wire.Posture{UID: 1000, GID: 1000, CapEff: "0000000000000000", CapBnd: "0000000000000000",
			NoNewPrivs: true, Seccomp: 2, ReadOnlyRoot: true, PidsMax: 256, MemoryMaxBytes: 1 << 30, CPUQuota: 1},
	})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{t: t, c: c, got: map[string]wire.Envelope{}}
	c.send(wire.MustNew(wire.TypeHello, "", "", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: goldenThread}))
	r.until("hello_agent_posture", isType(wire.TypeHello))

	c.send(userMessage("m1", "say hello into a file"))
	for _, name := range []string{"user_echo", "assistant_delta", "assistant_message", "tool_call", "tool_output", "tool_result"} {
		r.until(name, isType(wire.Type(name)))
	}
	r.until("turn_done", isType(wire.TypeTurnDone))

	c.send(userMessage("m2", "count to 99999"))
	r.until("tool_result_truncated", resultOf(t, "call_2"))
	r.until("", isType(wire.TypeTurnDone))

	c.send(userMessage("m3", "log in"))
	r.until("tool_result_awaiting_input", resultOf(t, "call_3"))
	r.until("tool_result_error", resultOf(t, "call_4"))
	r.until("tool_result_background", resultOf(t, "call_5"))
	r.until("tool_result_timed_out", resultOf(t, "call_6"))
	r.until("", isType(wire.TypeTurnDone))

	c.send(userMessage("m4", "wait"))
	r.until("", isType(wire.TypeUserEcho))
	testutil.RequireClosed(t, "the model taking the step", taken, waitFor)
	c.send(userMessage("m5", "are you there?"))
	r.until("error_reply", isType(wire.TypeError))
	c.send(wire.MustNew(wire.TypePing, "", "p1", nil))
	r.until("pong", isType(wire.TypePong))
	c.send(wire.MustNew(wire.TypeInterrupt, "", "i1", nil))
	r.until("turn_done_interrupted", isType(wire.TypeTurnDone))

	c.send(userMessage("m6", "try again"))
	r.until("error_event", isType(wire.TypeError))
	r.until("turn_done_error", isType(wire.TypeTurnDone))
	close(gate)

	c.send(userMessage("m7", "load it all"))
	r.until("tool_result_oom_killed", resultOf(t, "call_7"))
	r.until("", isType(wire.TypeTurnDone))

	for name, env := range r.got {
		if name == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			checkGolden(t, name, normalize(t, env, map[string]string{
				workspace: goldenWorkspace, outDir: goldenOutputDir,
			}))
		})
	}
}

// outputFile matches the time stamp in the name of a full-output file.
var outputFile = regexp.MustCompile(regexp.QuoteMeta(goldenOutputDir) + `/\d{8}-\d{6}-`)

// normalize renders env as its golden file holds it: the agent instance
// and the test's temporary paths replaced by fixed ones, indented.
func normalize(t *testing.T, env wire.Envelope, paths map[string]string) []byte {
	t.Helper()
	if env.Type == wire.TypeHello {
		h := decode[wire.Hello](t, env)
		h.Instance = goldenInstance
		env = wire.MustNew(env.Type, env.Thread, env.ID, h)
	}
	if env.Type == wire.TypeToolResult {
		// A timed-out command's group gets SIGHUP and SIGTERM at once
		// (shell.Process.stop); which one ends it is the kernel's and
		// bash's to decide (under load bash may be in its SIGHUP
		// handler when SIGTERM arrives, and re-raise that), so the
		// fixture holds SIGHUP's code for either.
		r := decode[wire.ToolResult](t, env)
		if r.Status == wire.StatusTimedOut && r.ExitCode != nil && *r.ExitCode == 128+int(syscall.SIGTERM) {
			*r.ExitCode = 128 + int(syscall.SIGHUP)
			seq := env.Seq
			env = wire.MustNew(env.Type, env.Thread, env.ID, r)
			env.Seq = seq
		}
	}
	raw, err := wire.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for from, to := range paths {
		text = strings.ReplaceAll(text, from, to)
	}
	// Full-output files are named after the time they were made.
	text = outputFile.ReplaceAllString(text, goldenOutputDir+"/20261201-100000-")
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(text), "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// checkGolden compares got with testdata/name.json, or writes it there
// with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the agent sends something else than %s (run with -update if that is intended):\n got: %s\nwant: %s", path, got, want)
	}
}

// The SIGTERM-to-SIGHUP rewrite of a timed-out result keeps the rest of
// the envelope as the agent sent it (its seq was lost once, failing the
// golden comparison whenever SIGTERM won under load).
func TestNormalizeTimedOutKeepsSeq(t *testing.T) {
	code := 128 + int(syscall.SIGTERM)
	env := wire.MustNew(wire.TypeToolResult, goldenThread, "m3", wire.ToolResult{CallID: "c", Name: "execute", Status: wire.StatusTimedOut, ExitCode: &code})
	env.Seq = 26
	var got wire.Envelope
	if err := json.Unmarshal(normalize(t, env, nil), &got); err != nil {
		t.Fatal(err)
	}
	r := decode[wire.ToolResult](t, got)
	if got.Seq != 26 || r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGHUP) {
		t.Errorf("normalized: seq %d, exit code %v; want seq 26 and SIGHUP's code", got.Seq, r.ExitCode)
	}
}
