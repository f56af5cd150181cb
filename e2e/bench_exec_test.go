package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// runTool runs one tool directly (run_tool) and waits for its tool_result.
func runTool(ctx context.Context, c *chat.Conn, id, name string, args any) (wire.ToolResult, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if err := c.Send(ctx, wire.MustNew(wire.TypeRunTool, "", id, wire.RunTool{Name: name, Arguments: raw})); err != nil {
		return wire.ToolResult{}, err
	}
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return wire.ToolResult{}, fmt.Errorf("run_tool %s: connection ended: %w", id, c.Err())
			}
			if ev.ID != id {
				continue
			}
			switch ev.Type {
			case wire.TypeToolResult:
				var res wire.ToolResult
				return res, ev.Decode(&res)
			case wire.TypeError:
				var werr wire.Error
				_ = ev.Decode(&werr)
				return wire.ToolResult{}, werr
			}
		case <-ctx.Done():
			return wire.ToolResult{}, fmt.Errorf("run_tool %s: %w", id, ctx.Err())
		}
	}
}

// benchExecute: `execute true` round trip client → bridge → agent → result,
// versus `docker exec` of `true` through the Engine API on the same container.
func benchExecute(t *testing.T, e *env, r *report) {
	const rounds = 40
	s := e.dial("")
	boxes := e.containers(map[string]string{"boxwire.thread": s.conn.Thread()})
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes", len(boxes))
	}
	cli, err := client.New(client.FromEnv) // negotiates the API version
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n := 0
	viaBoxwire := func() time.Duration {
		n++
		start := time.Now()
		res, err := runTool(ctx, s.conn, fmt.Sprintf("x%d", n), "execute", map[string]any{"command": "true"})
		d := time.Since(start)
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("execute true: %+v, %v", res, err)
		}
		return d
	}
	viaDocker := func() time.Duration {
		start := time.Now()
		dockerExecAPI(t, ctx, cli, boxes[0].ID, "true")
		return time.Since(start)
	}
	for range 5 {
		viaBoxwire()
		viaDocker()
	}
	ours, docker := interleave(t, rounds, viaBoxwire, viaDocker)
	ratio := medianMS(ours) / medianMS(docker)
	r.add(figure{name: "execute_true", value: medianMS(ours), unit: "ms", ratio: ratio, samples: msOf(ours),
		target: "≤ 0.025 of docker exec", met: met(ratio <= 0.025),
		note: fmt.Sprintf("execute true via client→bridge→agent %.2f ms vs docker exec (Engine API) %.2f ms, medians of %d", medianMS(ours), medianMS(docker), rounds)})
	benchExecuteBreakdown(t, ctx, e, s.conn, viaBoxwire, r)
	if benchProfileDir != "" { // bench_profile_test.go: where the bridge's CPU goes in execute true
		wait := profileCPU(t, e, "execute-cpu", 5)
		for start := time.Now(); time.Since(start) < 5*time.Second; {
			viaBoxwire()
		}
		wait()
	}
}

// spareRefill is more than the agent needs to start a spare login shell
// after a command (agent/execute/spare.go: 20 ms, then the shell's start).
const spareRefill = 150 * time.Millisecond

// benchExecuteBreakdown splits `execute true` by what each hop adds, all
// sides interleaved (the first changing every round), medians of 100,
// each after the same idle as the two executes (which need it for the
// agent's spare shells; a ping or an ls back to back would be faster by
// the machine's wake-up from idle alone, and the difference would show as
// the shell's): a ping straight to the agent's socket (the client
// library, one WebSocket hop, the agent's reader and writer), the same
// ping through the bridge (its relay hop), the ls tool and execute true
// straight to the agent (its tool dispatch, then the spare shell), and
// execute true through the bridge (what the bridge's event path adds:
// numbering, the store's append, the fan-out of tool_call and
// tool_result). A sixth side, ls back to back after another call, says
// what the idle costs (execute_idle_wake).
func benchExecuteBreakdown(t *testing.T, ctx context.Context, e *env, via *chat.Conn, viaExec func() time.Duration, r *report) {
	const rounds = 100
	thread := via.Thread()
	direct, err := chat.Dial(ctx, chat.Config{URL: "unix:" + e.agentSocket(thread), Thread: thread})
	if err != nil {
		t.Fatalf("dial the agent directly: %v", err)
	}
	defer direct.Close()
	n := 0
	tool := func(name string, args any) func() time.Duration {
		return func() time.Duration {
			n++
			start := time.Now()
			res, err := runTool(ctx, direct, fmt.Sprintf("d%d", n), name, args)
			d := time.Since(start)
			if err != nil || res.Error != "" {
				t.Fatalf("%s straight to the agent: %+v, %v", name, res, err)
			}
			return d
		}
	}
	ping := func(c *chat.Conn) func() time.Duration { return timedPing(t, ctx, c) }
	// paced leaves the agent time to start its spare shells again
	// (untimed), as the docker exec between two of ours does in
	// benchExecute: back to back, the second command finds none.
	paced := func(f func() time.Duration) func() time.Duration {
		return func() time.Duration {
			time.Sleep(spareRefill)
			return f()
		}
	}
	ls := tool("ls", map[string]any{"path": "."})
	sides := []func() time.Duration{paced(ping(direct)), paced(ping(via)), paced(ls),
		paced(tool("execute", map[string]any{"command": "true"})), paced(viaExec), ls}
	got := make([][]time.Duration, len(sides))
	for i := range rounds {
		for k := range sides {
			j := (i + k) % len(sides)
			got[j] = append(got[j], sides[j]())
		}
	}
	m := make([]float64, len(sides))
	for i := range sides {
		m[i] = medianMS(got[i])
	}
	pingDirect, pingVia, lsDirect, execDirect, execVia, lsAtOnce := m[0], m[1], m[2], m[3], m[4], m[5]
	r.add(figure{name: "execute_breakdown", value: execVia, unit: "ms", samples: msOf(got[4]),
		note: fmt.Sprintf("execute true %.2f ms = client+hop+agent I/O (ping to the agent) %.2f + bridge relay hop %.2f + bridge event path (store, numbering, 2 events) %.2f + agent tool dispatch (ls − ping) %.2f + shell (execute − ls, straight to the agent) %.2f; each side after %v idle, medians of %d, interleaved",
			execVia, pingDirect, pingVia-pingDirect, (execVia-execDirect)-(pingVia-pingDirect), lsDirect-pingDirect, execDirect-lsDirect, spareRefill, rounds)})
	r.add(figure{name: "execute_idle_wake", value: lsDirect - lsAtOnce, unit: "ms",
		note: fmt.Sprintf("what %v idle adds to a call: ls straight to the agent %.2f ms after it vs %.2f ms right after another call (medians of %d, the same rounds); part of every side above", spareRefill, lsDirect, lsAtOnce, rounds)})
}

// dockerExecAPI runs cmd in a container through the Engine API and waits for
// it to exit 0: create, attach (which starts it), read to EOF, inspect.
func dockerExecAPI(t *testing.T, ctx context.Context, cli *client.Client, id string, cmd ...string) {
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec create: %v", err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	insp, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil || insp.ExitCode != 0 {
		t.Fatalf("exec inspect: %+v, %v", insp, err)
	}
}

// benchGrep: the grep tool versus ripgrep over a generated 50k-file tree in
// the same sandbox, both through run_tool so both pay the same round trip.
func benchGrep(t *testing.T, e *env, r *report) {
	const rounds = 5
	s := e.dial("")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	gen := `python3 - <<'EOF'
import os
for i in range(50000):
    d = "/workspace/tree/d%d/e%d" % (i % 50, i % 20)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%d.txt" % (d, i), "w") as f:
        f.write("line one of file %d\nsome filler text here\n" % i)
        if i % 97 == 0:
            f.write("the needle_xyzzy is here\n")
EOF
find /workspace/tree -type f | wc -l`
	res, err := runTool(ctx, s.conn, "gen", "execute", map[string]any{"command": gen, "timeout": 600})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Output != "50000\n" {
		t.Fatalf("generate the tree: %+v, %v", res, err)
	}
	n := 0
	timed := func(name string, args any) func() time.Duration {
		return func() time.Duration {
			n++
			start := time.Now()
			res, err := runTool(ctx, s.conn, fmt.Sprintf("g%d", n), name, args)
			d := time.Since(start)
			if err != nil || res.Error != "" {
				t.Fatalf("%s: %+v, %v", name, res, err)
			}
			return d
		}
	}
	tool := timed("grep", map[string]any{"pattern": "needle_xyzzy", "path": "tree", "mode": "files", "max_results": 1000})
	rg := timed("execute", map[string]any{"command": "rg -l needle_xyzzy tree | wc -l"})
	tool()
	rg()
	ours, theirs := interleave(t, rounds, tool, rg)
	ratio := medianMS(ours) / medianMS(theirs)
	r.add(figure{name: "grep_50k", value: medianMS(ours), unit: "ms", ratio: ratio, samples: msOf(ours),
		target: "≤ 2× ripgrep", met: met(ratio <= 2),
		note: fmt.Sprintf("grep tool %.0f ms vs `rg -l` via execute %.0f ms on 50k files, medians of %d", medianMS(ours), medianMS(theirs), rounds)})
}

// deleteThreads deletes threads all at once, as their users would after a
// burst, and then requires that each one's sandbox and workspace volume are
// gone: deleting under load removes everything (the bridge retries until it
// has), and the run leaves nothing behind for its teardown to clean up.
func deleteThreads(t *testing.T, ctx context.Context, e *env, threads []string) {
	t.Helper()
	cfg := chat.Config{URL: e.bridge.url, Token: e.token}
	errs := make([]error, len(threads))
	var wg sync.WaitGroup
	for i, id := range threads {
		wg.Go(func() { errs[i] = chat.DeleteThread(ctx, cfg, id) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("delete thread %s under load: %v", threads[i], err)
		}
	}
	for _, id := range threads {
		if left := e.containers(map[string]string{"boxwire.thread": id}); len(left) > 0 {
			t.Errorf("thread %s deleted, but its sandbox %s is still there", id, left[0].ID)
		}
		vols, err := e.engine.ListVolumes(ctx, map[string]string{"boxwire.thread": id})
		if err != nil {
			t.Fatalf("list volumes: %v", err)
		}
		if len(vols) > 0 {
			t.Errorf("thread %s deleted, but its volume %s is still there", id, vols[0])
		}
	}
}
