package sandbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/moby/moby/client"
)

// A dead sandbox's last log lines stay readable until it is removed, the
// tail is the end of what it wrote, and the engine bounds the log on disk.
func TestLogsOfDeadSandbox(t *testing.T) {
	e := newEnv(t)
	spec := e.spec()
	// Like the agent, all on stderr: the engine copies stdout and stderr
	// separately, so it does not keep their relative order.
	spec.Cmd = []string{"sh", "-c", `exec 1>&2; for i in $(seq 1 100); do echo "line $i"; done; echo "fatal error: out of threads"; exit 2`}
	sb := e.create(spec)
	if got := e.waitStopped(sb.ID); got.ExitCode != 2 {
		t.Fatalf("exit code %d, want 2", got.ExitCode)
	}
	// The engine copies the output into its log on its own time: the last
	// lines may land a moment after the exit.
	want := "line 99\nline 100\nfatal error: out of threads\n"
	var tail string
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if tail, err = e.mgr.Logs(e.ctx(), sb.ID, 3); err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if tail == want || time.Now().After(deadline) {
			break
		}
	}
	if tail != want {
		t.Fatalf("tail = %q, want %q", tail, want)
	}
	res, err := e.cli.ContainerInspect(e.ctx(), sb.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lc := res.Container.HostConfig.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] == "" || lc.Config["max-file"] == "" {
		t.Errorf("log config %+v: want a json-file log with a size bound", lc)
	}
	if err := e.mgr.Remove(e.ctx(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mgr.Logs(e.ctx(), sb.ID, 3); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Logs of a removed sandbox: %v, want ErrNotFound", err)
	}
}
