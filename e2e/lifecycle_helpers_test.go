package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// api sends an authenticated request to the bridge's HTTP API and decodes
// a JSON answer into out (when not nil). It returns the status.
func (e *env) api(method, path string, body, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+turnTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.bridge.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// createThread posts req and fails the test unless the bridge answers 201.
func (e *env) createThread(req wire.CreateThread) wire.ThreadInfo {
	e.t.Helper()
	var info wire.ThreadInfo
	if code := e.api(http.MethodPost, "/v1/threads", req, &info); code != http.StatusCreated {
		e.t.Fatalf("create thread %+v: status %d\n%s", req, code, e.bridge.logText())
	}
	return info
}

// apiError is the JSON error body of the bridge.
type apiError struct {
	Error wire.Error `json:"error"`
}

// runGC runs `bridge gc` for this env's bridge id and data dir.
func (e *env) runGC(extraEnv ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "gc")
	cmd.Env = append(os.Environ(), "BOXWIRE_BRIDGE_ID="+e.id, "BOXWIRE_DATA_DIR="+e.dataDir)
	cmd.Env = append(cmd.Env, extraEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("bridge gc: %v\n%s", err, out)
	}
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

// assertClean fails unless no labelled container or volume of this bridge
// is left. Tests call it at their end, after deleting, expiring or gc.
func (e *env) assertClean() {
	e.t.Helper()
	if n := len(e.containers(nil)); n != 0 {
		e.t.Errorf("%d labelled containers left", n)
	}
	if v := e.volumes(); len(v) != 0 {
		e.t.Errorf("labelled volumes left: %v", v)
	}
	if w := e.workspaceLeftovers(); len(w) != 0 { // workspace_helpers_test.go
		e.t.Errorf("workspace images or loop devices left: %v", w)
	}
}

// cleanAtEnd stops the bridge (if running), runs gc and asserts that
// nothing is left, when the test ends.
func (e *env) cleanAtEnd() {
	e.t.Cleanup(func() {
		if e.bridge != nil {
			e.bridge.stop(e.t)
		}
		e.runGC()
		e.assertClean()
	})
}

// waitFor polls cond every 100ms until it holds or eventTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", eventTimeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
		run("apt-get", "install", "-y", "runsc")
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
