package sandbox_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

func TestWorkspaceVolumeOutlivesSandbox(t *testing.T) {
	e := newEnv(t)
	vol := "bwtest-ws-" + randHex(t)
	e.cleanupVolume(vol)
	spec := e.spec()
	spec.WorkspaceVolume = vol

	first := e.create(spec)
	e.mustExec(first.ID, "sh", "-c", "echo kept > "+sandbox.WorkspaceMount+"/file")
	if err := e.mgr.Remove(e.ctx(), first.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := e.mgr.Inspect(e.ctx(), first.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Inspect after Remove: %v, want ErrNotFound", err)
	}
	v, err := e.cli.VolumeInspect(e.ctx(), vol, client.VolumeInspectOptions{})
	if err != nil {
		t.Fatalf("volume gone after removing its sandbox: %v", err)
	}
	if v.Volume.Labels[runLabel] != e.run {
		t.Errorf("volume labels = %v, want the spec's labels", v.Volume.Labels)
	}

	spec.Name = "bwtest-" + randHex(t)
	second := e.create(spec)
	if got := e.mustExec(second.ID, "cat", sandbox.WorkspaceMount+"/file"); got != "kept" {
		t.Errorf("workspace file in the new sandbox = %q, want kept", got)
	}
	if err := e.mgr.RemoveVolume(e.ctx(), vol); err == nil {
		t.Error("RemoveVolume of a volume in use succeeded")
	}
	if err := e.mgr.Remove(e.ctx(), second.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := e.mgr.RemoveVolume(e.ctx(), vol); err != nil {
		t.Fatalf("RemoveVolume: %v", err)
	}
	if _, err := e.cli.VolumeInspect(e.ctx(), vol, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("volume after RemoveVolume: %v, want not found", err)
	}
	if err := e.mgr.RemoveVolume(e.ctx(), vol); err != nil {
		t.Errorf("RemoveVolume of a missing volume: %v, want nil", err)
	}
}

func TestListFiltersByLabel(t *testing.T) {
	e := newEnv(t)
	a, b := e.spec(), e.spec()
	a.Labels["boxwire.thread"] = "a"
	b.Labels["boxwire.thread"] = "b"
	sa, sb := e.create(a), e.create(b)
	if err := e.mgr.Stop(e.ctx(), sb.ID, 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	all, err := e.mgr.List(e.ctx(), map[string]string{runLabel: e.run})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	byID := map[string]sandbox.Sandbox{}
	for _, s := range all {
		byID[s.ID] = s
	}
	if len(all) != 2 || !byID[sa.ID].Running || byID[sb.ID].ID == "" || byID[sb.ID].Running {
		t.Fatalf("List(run) = %+v, want %s running and %s stopped", all, sa.ID, sb.ID)
	}
	if got := byID[sa.ID]; got.Name != a.Name || got.Image != testImage || got.Labels["boxwire.thread"] != "a" {
		t.Errorf("listed %+v, want name %s, image %s, thread a", got, a.Name, testImage)
	}

	only, err := e.mgr.List(e.ctx(), map[string]string{runLabel: e.run, "boxwire.thread": "b"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(only) != 1 || only[0].ID != sb.ID {
		t.Errorf("List(run, thread=b) = %+v, want only %s", only, sb.ID)
	}
	none, err := e.mgr.List(e.ctx(), map[string]string{runLabel: e.run, "boxwire.thread": "c"})
	if err != nil || len(none) != 0 {
		t.Errorf("List(thread=c) = %+v, %v; want none", none, err)
	}
}

func TestStopReportsExit(t *testing.T) {
	e := newEnv(t)
	spec := e.spec()
	spec.Cmd = []string{"sh", "-c", "trap 'exit 3' TERM; echo trapped >&2; while :; do sleep 0.1; done"}
	sb := e.create(spec)
	// Running is not enough: a SIGTERM before the trap is set would not
	// give exit 3.
	e.waitLog(sb.ID, "trapped\n")
	start := time.Now()
	if err := e.mgr.Stop(e.ctx(), sb.ID, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop took %v; the command exits on SIGTERM", took)
	}
	got, err := e.mgr.Inspect(e.ctx(), sb.ID)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if got.Running || got.ExitCode != 3 || got.OOMKilled {
		t.Errorf("after Stop: %+v, want stopped with exit 3", got)
	}
	if err := e.mgr.Stop(e.ctx(), sb.ID, time.Second); err != nil {
		t.Errorf("Stop of a stopped sandbox: %v", err)
	}
}

func TestOOMKilled(t *testing.T) {
	e := newEnv(t)
	spec := e.spec()
	spec.MemoryBytes = 32 << 20
	// tail holds the whole (newline-free) last line in memory and is
	// killed; the shell outlives it, as an agent would, because the engine
	// records an OOM event that arrives after the exit as nothing. The
	// event passes the shim, containerd and dockerd: on a loaded machine
	// half a second was seen to be too short for it.
	spec.Cmd = []string{"sh", "-c", "head -c 512m /dev/zero | tail; st=$?; sleep 3; exit $st"}
	sb := e.create(spec)
	got := e.waitStopped(sb.ID)
	if !got.OOMKilled || got.ExitCode != 137 {
		t.Errorf("after exceeding memory: %+v, want OOMKilled with exit 137", got)
	}
}

func TestMissingSandbox(t *testing.T) {
	e := newEnv(t)
	const id = "bwtest-no-such-sandbox"
	if err := e.mgr.Remove(e.ctx(), id); err != nil {
		t.Errorf("Remove(missing) = %v, want nil", err)
	}
	if _, err := e.mgr.Inspect(e.ctx(), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect(missing) = %v, want ErrNotFound", err)
	}
	if err := e.mgr.Stop(e.ctx(), id, 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stop(missing) = %v, want ErrNotFound", err)
	}
	if err := e.mgr.RemoveVolume(e.ctx(), "bwtest-no-such-volume"); err != nil {
		t.Errorf("RemoveVolume(missing) = %v, want nil", err)
	}
}

// TestFailedCreateLeavesNothing covers a missing image and a command that
// cannot start: each fails, and neither the container nor the volume the
// call created is left behind.
func TestFailedCreateLeavesNothing(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		image   string
		cmd     []string
		wantErr error
	}{
		{"missing image", "boxwire-test-no-such-image:latest", sleepCmd, sandbox.ErrImageNotFound},
		{"command cannot start", testImage, []string{"/no/such/command"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := e.spec()
			spec.Image, spec.Cmd = tt.image, tt.cmd
			spec.WorkspaceVolume = "bwtest-ws-" + randHex(t)
			e.cleanupVolume(spec.WorkspaceVolume)
			sb, err := e.mgr.Create(e.ctx(), spec)
			if err == nil {
				_ = e.mgr.Remove(context.Background(), sb.ID)
				t.Fatal("Create succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Create = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), spec.Name) ||
				(tt.wantErr == sandbox.ErrImageNotFound && !strings.Contains(err.Error(), tt.image)) {
				t.Errorf("error %q does not name the sandbox (and image)", err)
			}
			left, err := e.mgr.List(e.ctx(), map[string]string{runLabel: e.run})
			if err != nil || len(left) != 0 {
				t.Errorf("after a failed Create, List = %+v, %v; want nothing", left, err)
			}
			_, err = e.cli.VolumeInspect(e.ctx(), spec.WorkspaceVolume, client.VolumeInspectOptions{})
			if !cerrdefs.IsNotFound(err) {
				t.Errorf("volume after a failed Create: %v, want not found", err)
			}
		})
	}
}

// TestEngineUnavailable needs no engine: each host below does not answer.
func TestEngineUnavailable(t *testing.T) {
	refused := closedPort(t)
	hung := silentListener(t)
	tests := []struct {
		name, host string
	}{
		{"no such socket", "unix:///nonexistent.sock"},
		{"connection refused", "tcp://" + refused},
		{"accepts but never answers", "tcp://" + hung},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Host: tt.host})
			if err != nil {
				t.Fatalf("NewDocker: %v", err)
			}
			defer func() { _ = mgr.Close() }()
			check := func(op string, err error, took time.Duration) {
				t.Helper()
				if !errors.Is(err, sandbox.ErrEngineUnavailable) {
					t.Errorf("%s = %v, want ErrEngineUnavailable", op, err)
				} else if want := strings.TrimPrefix(strings.TrimPrefix(tt.host, "unix://"), "tcp://"); !strings.Contains(err.Error(), want) {
					t.Errorf("%s error %q does not name the host %s", op, err, want)
				}
				if took > 3*time.Second {
					t.Errorf("%s took %v", op, took)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			check("Ping", mgr.Ping(ctx), time.Since(start))

			ctx, cancel = context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start = time.Now()
			_, err = mgr.Create(ctx, sandbox.Spec{Image: testImage, Cmd: sleepCmd})
			check("Create", err, time.Since(start))
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentListener returns a loopback address that accepts connections (in the
// kernel backlog) but never answers; it is closed when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// TestCancelledCreateLeavesNothing: a caller that gives up while Create
// runs (a client gone during thread creation) gets its context's error at
// once, and nothing is left behind once the engine's work is over, whatever
// it had done by then; a Create that finished first returned a sandbox
// that is there. The cancel lands at moments spread over a Create's run.
func TestCancelledCreateLeavesNothing(t *testing.T) {
	e := newEnv(t)
	for _, after := range []time.Duration{0, 5, 20, 50, 100, 200, 400} {
		t.Run((after * time.Millisecond).String(), func(t *testing.T) {
			spec := e.spec()
			spec.Labels = map[string]string{testLabel: "1", runLabel: e.run + "-" + randHex(t)}
			spec.WorkspaceVolume = "bwtest-ws-" + randHex(t)
			ctx, cancel := context.WithCancel(e.ctx())
			stop := time.AfterFunc(after*time.Millisecond, cancel)
			defer stop.Stop()
			sb, err := e.mgr.Create(ctx, spec)
			mine := map[string]string{runLabel: spec.Labels[runLabel]}
			list := func() ([]sandbox.Sandbox, []string) {
				left, lerr := e.mgr.List(e.ctx(), mine)
				vols, verr := e.mgr.ListVolumes(e.ctx(), mine)
				if lerr != nil || verr != nil {
					t.Fatalf("List: %v; ListVolumes: %v", lerr, verr)
				}
				return left, vols
			}
			left, vols := list()
			if err == nil { // finished before the cancel
				if len(left) != 1 || left[0].ID != sb.ID {
					t.Errorf("Create succeeded but List = %+v", left)
				}
				if err := e.mgr.Remove(context.Background(), sb.ID); err != nil {
					t.Error(err)
				}
				if err := e.mgr.RemoveVolume(context.Background(), spec.WorkspaceVolume); err != nil {
					t.Error(err)
				}
				return
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Create = %v, want context.Canceled", err)
			}
			// The engine's work may still be going on; it ends by removing
			// what it made.
			for deadline := time.Now().Add(waitTimeout); (len(left) != 0 || len(vols) != 0) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				left, vols = list()
			}
			if len(left) != 0 || len(vols) != 0 {
				t.Errorf("a cancelled Create left sandboxes %+v and volumes %v", left, vols)
				for _, sb := range left {
					_ = e.mgr.Remove(context.Background(), sb.ID)
				}
				for _, v := range vols {
					_ = e.mgr.RemoveVolume(context.Background(), v)
				}
			}
		})
	}
}
