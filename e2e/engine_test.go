package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
)

// containers lists this bridge's sandboxes (any state) through the engine.
func (e *env) containers(labels map[string]string) []sandbox.Sandbox {
	e.t.Helper()
	all := map[string]string{"boxwire.owner": e.id}
	for k, v := range labels {
		all[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	list, err := e.engine.List(ctx, all)
	if err != nil {
		e.t.Fatalf("list sandboxes: %v", err)
	}
	return list
}

// removeLeftovers deletes anything a test left with this bridge's label
// (a bridge stopped with SIGTERM keeps its sandboxes for adoption, so most
// tests end with some). It removes a few at once and allows each its own
// bound: fifty sandboxes on an engine busy with other runs outlasted one
// shared 30 s bound, and the run then failed with what it left behind.
func (e *env) removeLeftovers() {
	bound := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 2*time.Minute)
	}
	ctx, cancel := bound()
	list, err := e.engine.List(ctx, map[string]string{"boxwire.owner": e.id})
	cancel()
	if err != nil {
		e.t.Logf("leftovers: list sandboxes: %v", err)
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for _, sb := range list {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			ctx, cancel := bound()
			defer cancel()
			if err := e.engine.Remove(ctx, sb.ID); err != nil {
				e.t.Logf("leftovers: remove %s: %v", sb.Name, err)
			}
			if th := sb.Labels["boxwire.thread"]; th != "" {
				e.engine.RemoveVolume(ctx, "boxwire-ws-"+th) // checked below with the rest
			}
		}()
	}
	wg.Wait()
	ctx, cancel = bound()
	defer cancel()
	vols, _ := e.engine.ListVolumes(ctx, map[string]string{"boxwire.owner": e.id})
	for _, v := range vols {
		if err := e.engine.RemoveVolume(ctx, v); err != nil { // and its workspace image and loop device
			e.t.Logf("leftovers: remove volume %s: %v", v, err)
		}
	}
	e.engine.CollectWorkspaces(ctx)
	_ = boxdir.RemoveAll(e.dataDir) // the sandboxes' folders: the agent folders are tmpfs mounts
}

// volumes lists this bridge's labelled volumes.
func (e *env) volumes() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	vols, err := e.engine.ListVolumes(ctx, map[string]string{"boxwire.owner": e.id})
	if err != nil {
		e.t.Fatalf("list volumes: %v", err)
	}
	return vols
}

// dockerExec runs a command in a container through the docker CLI.
func dockerExec(t *testing.T, id string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", id}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// inspect returns `docker inspect` of a container as JSON.
func dockerInspect(t *testing.T, id string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "inspect", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	var list []map[string]any
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
		t.Fatalf("docker inspect %s: %v %s", id, err, out)
	}
	return list[0]
}

// docker runs the docker CLI and fails the test on an error.
func docker(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %v: %v %s", args, err, out)
	}
}

// killSandbox kills a sandbox's container with SIGKILL.
func killSandbox(t *testing.T, id string) {
	t.Helper()
	if out, err := exec.Command("docker", "kill", "-s", "KILL", id).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
}

// sandboxHolds reports where, in the sandbox of thread, secret occurs:
// its files (all but /proc, /sys and /dev, searched as root) and the
// environment of every process in it (read from the host's /proc: root in
// the sandbox has no capabilities, so cannot read other users' environ).
// The secret is passed as an argument, so it is only in the searching
// process's command line, which is not searched.
func (e *env) sandboxHolds(thread, secret string) string {
	e.t.Helper()
	boxes := e.containers(map[string]string{"boxwire.thread": thread})
	if len(boxes) != 1 {
		e.t.Fatalf("want 1 sandbox for thread %s, have %d", thread, len(boxes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*turnTimeout)
	defer cancel()
	const script = `grep -rIlF -e "$1" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; true`
	out, err := exec.CommandContext(ctx, "docker", "exec", "-u", "0", boxes[0].ID, "sh", "-c", script, "sh", secret).CombinedOutput()
	if err != nil {
		e.t.Fatalf("search sandbox files: %v\n%s", err, out)
	}
	where := strings.Fields(string(out))
	pids, err := exec.CommandContext(ctx, "docker", "top", boxes[0].ID, "-eo", "pid").Output()
	if err != nil {
		e.t.Fatalf("list sandbox processes: %v", err)
	}
	n := 0
	for _, pid := range strings.Fields(string(pids))[1:] { // after the PID header
		data, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			continue // exited since
		}
		n++
		if strings.Contains(string(data), secret) {
			where = append(where, "environ of host pid "+pid)
		}
	}
	if n == 0 {
		e.t.Fatalf("read no process environment of sandbox %s", boxes[0].ID)
	}
	return strings.Join(where, "\n")
}

// imageID is the id the engine gives ref now.
func imageID(t *testing.T, ref string) string {
	t.Helper()
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", ref).CombinedOutput()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v %s", ref, err, out)
	}
	return strings.TrimSpace(string(out))
}

// testTag tags image as a new reference of its own for this test and
// removes the tag (and the images built under it) when the test ends —
// after the sandboxes went, if the test registers it before cleanAtEnd.
func testTag(t *testing.T) string {
	t.Helper()
	tag := "boxwire-e2e-update:" + randHex(6)
	if out, err := exec.Command("docker", "tag", image, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v %s", tag, err, out)
		}
	})
	return tag
}

// rebuild builds a trivial new layer on tag, under the same tag: what
// shipping an agent update looks like to the bridge. It returns the new id.
func rebuild(t *testing.T, tag string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader("FROM " + tag + "\nLABEL boxwire.e2e.rebuild=" + randHex(6) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v %s", err, out)
	}
	return imageID(t, tag)
}

// engineProxy is a unix socket that forwards to the real engine's socket
// until cut, so a test can take the engine away from a bridge without
// touching the engine other tests use.
type engineProxy struct {
	path string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newEngineProxy(t *testing.T) *engineProxy {
	dir, err := os.MkdirTemp("", "bwp")
	if err != nil {
		t.Fatal(err)
	}
	p := &engineProxy{path: filepath.Join(dir, "docker.sock"), conns: map[net.Conn]struct{}{}}
	p.restore(t)
	t.Cleanup(func() { p.cut(); p.wg.Wait(); os.RemoveAll(dir) })
	return p
}

// host is the DOCKER_HOST value for the proxy.
func (p *engineProxy) host() string { return "unix://" + p.path }

// restore starts listening again.
func (p *engineProxy) restore(t *testing.T) {
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.forward(c) }()
		}
	}()
}

// cut stops listening and closes every forwarded connection.
func (p *engineProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		os.Remove(p.path)
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

func (p *engineProxy) forward(c net.Conn) {
	up, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = err
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// ensureRunsc installs Debian's runsc when missing and registers it with
// the engine as runtime "runsc" (ptrace platform, no network, host unix
// sockets allowed so the agent can serve on the bind-mounted folder), then
// asks dockerd to reload its configuration with SIGHUP, which does not
// restart it or its containers.
func ensureRunsc(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*turnTimeout)
	defer cancel()
	run := func(name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		run("bash", "../image/apt.sh", "install", "runsc") // waits for the other installs of make test
	}
	info := run("docker", "info", "--format", "{{json .Runtimes}}")
	if strings.Contains(info, `"runsc"`) {
		return
	}
	path, _ := exec.LookPath("runsc")
	const daemonJSON = "/etc/docker/daemon.json"
	cfg := map[string]any{}
	if raw, err := os.ReadFile(daemonJSON); err == nil {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", daemonJSON, err)
		}
	}
	runtimes, _ := cfg["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	runtimes["runsc"] = map[string]any{"path": path,
		"runtimeArgs": []string{"--platform=ptrace", "--network=none", "--host-uds=all"}}
	cfg["runtimes"] = runtimes
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(daemonJSON, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(run("cat", "/var/run/docker.pid"))
	run("kill", "-HUP", pid)
	waitFor(t, "dockerd to load runsc", func() bool {
		out, _ := exec.CommandContext(ctx, "docker", "info", "--format", "{{json .Runtimes}}").Output()
		return strings.Contains(string(out), `"runsc"`)
	})
}
