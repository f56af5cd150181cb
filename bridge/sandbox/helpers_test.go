package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

const (
	// testImage is the local base image every machine here has.
	testImage = "boxwire-base:bookworm"
	// testLabel marks every container and volume these tests create.
	testLabel = "boxwire.test"
	// runLabel carries a per-test random value, so List assertions do not
	// see other tests' (or other packages') sandboxes.
	runLabel = "boxwire.test.run"
	// opTimeout bounds one engine call in a test.
	opTimeout = 30 * time.Second
	// waitTimeout bounds a poll for a state change.
	waitTimeout = 30 * time.Second
)

// sleepCmd keeps a sandbox running without an init.
var sleepCmd = []string{"sleep", "infinity"}

// env is one test's view of the engine: the manager under test and a plain
// SDK client for looking inside sandboxes (exec, volume inspect).
type env struct {
	t   *testing.T
	mgr *sandbox.Docker
	cli *client.Client
	run string
}

// newEnv connects to the local engine. It skips the test unless engine
// tests are opted in to (testutil.EngineTests), and then fails it when the
// engine does not answer.
func newEnv(t *testing.T) *env {
	t.Helper()
	testutil.NeedEngine(t)
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{})
	if err != nil {
		t.Fatalf("NewDocker: %v", err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mgr.Ping(ctx); err != nil {
		t.Fatalf("%s=1 and no Docker engine answers at %s (start one with image/engine.sh, "+
			"or unset %s to skip these tests): %v", testutil.EngineTests, mgr.Host(), testutil.EngineTests, err)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return &env{t: t, mgr: mgr, cli: cli, run: randHex(t)}
}

// ctx returns a context bounded by opTimeout, cancelled with the test.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// spec returns a spec for the test image, labelled for this test, with a
// unique name.
func (e *env) spec() sandbox.Spec {
	return sandbox.Spec{
		Name:   "bwtest-" + randHex(e.t),
		Image:  testImage,
		Cmd:    sleepCmd,
		Labels: map[string]string{testLabel: "1", runLabel: e.run},
	}
}

// create creates spec and removes the sandbox when the test ends.
func (e *env) create(spec sandbox.Spec) sandbox.Sandbox {
	e.t.Helper()
	sb, err := e.mgr.Create(e.ctx(), spec)
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	e.t.Cleanup(func() {
		if err := e.mgr.Remove(context.Background(), sb.ID); err != nil {
			e.t.Errorf("cleanup: %v", err)
		}
	})
	return sb
}

// cleanupVolume removes the named volume when the test ends.
func (e *env) cleanupVolume(name string) {
	e.t.Cleanup(func() {
		if err := e.mgr.RemoveVolume(context.Background(), name); err != nil {
			e.t.Errorf("cleanup: %v", err)
		}
	})
}

// exec runs cmd in the sandbox (as the sandbox's user) and returns its
// stdout, stderr and exit code.
func (e *env) exec(id string, cmd ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx := e.ctx()
	ex, err := e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: cmd, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		e.t.Fatalf("exec %q: %v", cmd, err)
	}
	att, err := e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		e.t.Fatalf("exec attach %q: %v", cmd, err)
	}
	defer att.Close()
	if err := att.Conn.SetDeadline(time.Now().Add(opTimeout)); err != nil {
		e.t.Fatalf("exec deadline: %v", err)
	}
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil {
		e.t.Fatalf("exec %q output: %v", cmd, err)
	}
	insp, err := e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		e.t.Fatalf("exec inspect %q: %v", cmd, err)
	}
	return out.String(), errb.String(), insp.ExitCode
}

// mustExec runs cmd and fails the test unless it exits 0; it returns stdout
// without surrounding space.
func (e *env) mustExec(id string, cmd ...string) string {
	e.t.Helper()
	out, errOut, code := e.exec(id, cmd...)
	if code != 0 {
		e.t.Fatalf("exec %q: exit %d, stderr %q", cmd, code, errOut)
	}
	return strings.TrimSpace(out)
}

// waitStopped polls until the sandbox is not running and returns its state.
func (e *env) waitStopped(id string) sandbox.Sandbox {
	e.t.Helper()
	return testutil.Poll(e.t, "sandbox "+id+" stopped", waitTimeout, func() (sandbox.Sandbox, error) {
		sb, err := e.mgr.Inspect(e.ctx(), id)
		if err != nil {
			e.t.Fatalf("Inspect: %v", err)
		}
		if sb.Running {
			return sb, errors.New("still running")
		}
		return sb, nil
	})
}

// waitLog polls the sandbox's log until its last line is line.
func (e *env) waitLog(id, line string) {
	e.t.Helper()
	testutil.Until(e.t, fmt.Sprintf("sandbox %s log ending %q", id, line), waitTimeout, func() error {
		tail, err := e.mgr.Logs(e.ctx(), id, 1)
		if err != nil {
			e.t.Fatalf("Logs: %v", err)
		}
		if tail != line {
			return fmt.Errorf("log ends %q", tail)
		}
		return nil
	})
}

// waitFile waits for path to exist with content ending in a newline and
// returns that content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	return testutil.Poll(t, filepath.Base(path)+" written", waitTimeout, func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("read %s: %v", path, err)
		}
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return "", fmt.Errorf("content %q (%v)", b, err)
		}
		return string(b), nil
	})
}

// statusField returns a field of a /proc/PID/status text.
func statusField(t *testing.T, status, name string) string {
	t.Helper()
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in status:\n%s", name, status)
	return ""
}

func randHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("rand: %v", err)
	}
	return hex.EncodeToString(b)
}
