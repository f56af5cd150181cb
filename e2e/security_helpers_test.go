package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// toolRun is what one run_tool request produced.
type toolRun struct {
	result  wire.ToolResult
	streamd int             // bytes of tool_output streamed to the client
	took    time.Duration   // from the request to its tool_result
	others  []wire.Envelope // the connection's other events meanwhile
}

// runTool sends a run_tool request for tool name with args and waits (at
// most wait) for its tool_result, skipping the connection's other events.
func (s *session) runTool(name string, args any, wait time.Duration) toolRun {
	s.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		s.t.Fatal(err)
	}
	id := "rt-" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	req := wire.MustNew(wire.TypeRunTool, s.conn.Thread(), id, wire.RunTool{Name: name, Arguments: raw})
	if err := s.conn.Send(ctx, req); err != nil {
		s.t.Fatalf("send run_tool: %v", err)
	}
	var run toolRun
	for {
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				s.t.Fatalf("connection ended during run_tool %s: %v", name, s.conn.Err())
			}
			if ev.Type == wire.TypeSandboxReplaced {
				s.t.Fatalf("run_tool %s: the sandbox was replaced while it ran (%s): the call's result is lost", name, ev.Data)
			}
			if ev.ID != id {
				run.others = append(run.others, ev)
				continue
			}
			switch ev.Type {
			case wire.TypeToolOutput:
				var out wire.ToolOutput
				ev.Decode(&out)
				run.streamd += len(out.Output)
			case wire.TypeToolResult:
				ev.Decode(&run.result)
				run.took = time.Since(start)
				return run
			case wire.TypeError:
				s.t.Fatalf("run_tool %s: %s", name, ev.Data)
			}
		case <-ctx.Done():
			s.t.Fatalf("run_tool %s: no tool_result within %v", name, wait)
		}
	}
}

// sh runs command through execute with a timeout in seconds and returns
// the result; the wait allows for a slow, shared machine.
func (s *session) sh(command string, timeout int) wire.ToolResult {
	s.t.Helper()
	return s.runTool("execute", map[string]any{"command": command, "timeout": timeout},
		time.Duration(timeout)*time.Second+turnTimeout).result
}

// exitCode is r's exit code, or -1 when it has none.
func exitCode(r wire.ToolResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// pinger measures another session's round trips while a case runs. Its
// goroutine is owned by the pinger: stop waits for it.
type pinger struct {
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed when the first ping has its answer (or failed)

	mu    sync.Mutex
	max   time.Duration
	n     int
	fails []error
}

// watchPings pings s every interval until stop is called.
func watchPings(s *session, interval time.Duration) *pinger {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pinger{cancel: cancel, done: make(chan struct{}), first: make(chan struct{})}
	go func() {
		defer close(p.done)
		var once sync.Once
		for {
			pctx, pcancel := context.WithTimeout(ctx, eventTimeout)
			rtt, err := s.conn.Ping(pctx)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			if err != nil {
				p.fails = append(p.fails, err)
			} else {
				p.n++
				p.max = max(p.max, rtt)
			}
			p.mu.Unlock()
			once.Do(func() { close(p.first) })
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return p
}

// stop ends the pings, waits for the goroutine and returns the slowest
// round trip, the number of answered pings and the failures. A case may
// end before the goroutine's first ping was answered: stop waits for that
// answer (each ping has a deadline), so there is always one to judge.
func (p *pinger) stop() (time.Duration, int, []error) {
	select {
	case <-p.first:
	case <-time.After(2 * eventTimeout):
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max, p.n, p.fails
}

// containerOf is the id of the sandbox of a thread-scoped thread.
func (e *env) containerOf(thread string) string {
	e.t.Helper()
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		e.t.Fatalf("thread %s has %d sandboxes", thread, len(boxes))
	}
	return boxes[0].ID
}

// bridgeRSS is the bridge process's resident memory in bytes (VmRSS) and
// its peak (VmHWM).
func (b *bridgeProc) rss(t *testing.T) (rss, peak int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("bridge status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

// unixGet sends GET path with a bearer token over the unix socket sock and
// returns the status code.
func unixGet(t *testing.T, sock, path, token string) int {
	t.Helper()
	c := &http.Client{Timeout: eventTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "http://sandbox"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, sock, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
