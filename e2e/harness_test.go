package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

// The e2e suite runs only when BOXWIRE_E2E=1 (make e2e sets it): it needs a
// Docker engine and the image named by BOXWIRE_IMAGE (make image builds it).
var (
	enabled   = os.Getenv("BOXWIRE_E2E") == "1"
	image     = envOr("BOXWIRE_IMAGE", "boxwire:latest")
	bridgeBin string // built once in TestMain
)

// Deadlines for waits in the suite. Every wait has one.
const (
	startTimeout = 30 * time.Second
	turnTimeout  = 60 * time.Second
	eventTimeout = 30 * time.Second
)

func TestMain(m *testing.M) {
	if !enabled {
		fmt.Println("e2e: skipped (set BOXWIRE_E2E=1, or run make e2e)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "boxwire-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bridgeBin = filepath.Join(dir, "bridge")
	args := []string{"build", "-o", bridgeBin}
	if !benchEnabled { // benchmarks measure the binary users run
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/boxwire/boxwire/bridge")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build bridge:", err)
		os.Exit(1)
	}
	if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: image %s is missing (run make image): %v\n", image, err)
		os.Exit(1)
	}
	before, err := engineObjects() // leftovers_test.go
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	left, err := leftovers(before)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: check for leftovers:", err)
		code = 1
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: the run left %d things behind (now removed):\n  %s\n", len(left), strings.Join(left, "\n  "))
		for _, obj := range left {
			removeLeftover(obj)
		}
		code = 1
	}
	os.Exit(code)
}

// env is one scenario's world: a scripted model, a bridge process and the
// engine, all cleaned up when the test ends.
type env struct {
	t       *testing.T
	llm     *llmscript.Server
	llmURL  string
	apiKey  string
	token   string
	id      string // the bridge id, the owner label of its sandboxes
	dataDir string
	engine  *sandbox.Docker

	bridge *bridgeProc
}

// newEnv starts a scripted model server on loopback with script (JSON).
func newEnv(t *testing.T, script string) *env {
	t.Helper()
	sc, err := llmscript.Parse([]byte(script))
	if err != nil {
		t.Fatalf("parse script: %v", err)
	}
	e := &env{
		t:      t,
		apiKey: "sk-e2e-" + randHex(12),
		token:  "tok-" + randHex(12),
		id:     "e2e-" + randHex(4),
	}
	e.llm = llmscript.New(sc, llmscript.Options{APIKey: e.apiKey})
	srv := httptest.NewServer(e.llm)
	t.Cleanup(srv.Close)
	e.llmURL = srv.URL + "/v1"
	// Short: unix socket paths must stay under 108 bytes.
	e.dataDir, err = os.MkdirTemp("", "bw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(e.dataDir) })
	recordRun(e.id, e.dataDir) // leftovers_test.go
	// Knows the workspace folder: RemoveVolume deletes a capped volume's image.
	e.engine, err = sandbox.NewDocker(sandbox.DockerConfig{Workspace: sandbox.WorkspaceConfig{Dir: workspaceDir(e.dataDir)}})
	if err != nil {
		t.Fatalf("engine client: %v", err)
	}
	t.Cleanup(func() { e.engine.Close() })
	t.Cleanup(e.removeLeftovers)
	return e
}

// bridgeProc is a running bridge binary.
type bridgeProc struct {
	cmd  *exec.Cmd
	url  string // http://127.0.0.1:PORT
	done chan struct{}
	err  error // after done

	mu  sync.Mutex
	log strings.Builder
}

var listenRE = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startBridge runs the bridge binary with extra environment and waits until
// it says where it listens.
func (e *env) startBridge(extraEnv ...string) *bridgeProc {
	e.t.Helper()
	b, err := e.launchBridge(extraEnv...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.bridge = b
	e.t.Cleanup(func() { b.stop(e.t) })
	return b
}

func (e *env) launchBridge(extraEnv ...string) (*bridgeProc, error) {
	cmd := exec.Command(bridgeBin, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(),
		"BOXWIRE_TOKEN="+e.token,
		"BOXWIRE_IMAGE="+image,
		"BOXWIRE_DATA_DIR="+e.dataDir,
		"BOXWIRE_BRIDGE_ID="+e.id,
		"BOXWIRE_MODEL=scripted",
		"OPENAI_BASE_URL="+e.llmURL,
		"OPENAI_API_KEY="+e.apiKey,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bridge: %w", err)
	}
	b := &bridgeProc{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			b.mu.Lock()
			b.log.WriteString(line + "\n")
			b.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		b.err = cmd.Wait()
		close(b.done)
	}()
	select {
	case b.url = <-found:
		return b, nil
	case <-b.done:
		return b, fmt.Errorf("bridge exited before listening (%v):\n%s", b.err, b.logText())
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		<-b.done
		return b, fmt.Errorf("bridge did not listen within %v:\n%s", startTimeout, b.logText())
	}
}

func (b *bridgeProc) logText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

// stop sends SIGTERM and waits (bounded) for the bridge to exit.
func (b *bridgeProc) stop(t *testing.T) {
	select {
	case <-b.done:
		return
	default:
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(startTimeout):
		b.cmd.Process.Kill()
		<-b.done
		t.Errorf("bridge did not stop within %v after SIGTERM", startTimeout)
	}
	if t.Failed() {
		t.Logf("bridge log:\n%s", b.logText())
	}
}

// dial opens a client connection to the bridge; thread "" makes a new thread.
func (e *env) dial(thread string) *session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread})
	if err != nil {
		e.t.Fatalf("dial bridge: %v\nbridge log:\n%s", err, e.bridge.logText())
	}
	e.t.Cleanup(func() { conn.Close() })
	return &session{t: e.t, conn: conn}
}

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

// removeLeftovers deletes anything a failed test left with this bridge's label.
func (e *env) removeLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	list, err := e.engine.List(ctx, map[string]string{"boxwire.owner": e.id})
	if err != nil {
		return
	}
	for _, sb := range list {
		e.engine.Remove(ctx, sb.ID)
		if th := sb.Labels["boxwire.thread"]; th != "" {
			e.engine.RemoveVolume(ctx, "boxwire-ws-"+th)
		}
	}
	vols, _ := e.engine.ListVolumes(ctx, map[string]string{"boxwire.owner": e.id})
	for _, v := range vols {
		e.engine.RemoveVolume(ctx, v) // and its workspace image and loop device
	}
	e.engine.CollectWorkspaces(ctx)
	_ = boxdir.RemoveAll(e.dataDir) // the sandboxes' folders: the agent folders are tmpfs mounts
}

// session is one client connection.
type session struct {
	t    *testing.T
	conn *chat.Conn
}

// turn sends text and collects the turn's events until turn_done.
func (s *session) turn(text string) (events []wire.Envelope, done wire.TurnDone) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	done, err := s.conn.Run(ctx, text, func(ev wire.Envelope) { events = append(events, ev) })
	if err != nil {
		s.t.Fatalf("turn %q: %v (events so far: %d)", text, err, len(events))
	}
	return events, done
}

// awaitEvent waits for the next event of type typ, skipping others.
func (s *session) awaitEvent(typ wire.Type) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				s.t.Fatalf("connection ended while waiting for %s: %v", typ, s.conn.Err())
			}
			if ev.Type == typ {
				return ev
			}
		case <-timer.C:
			s.t.Fatalf("no %s event within %v", typ, eventTimeout)
		}
	}
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

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// httpGet sends a GET with an optional bearer token.
func httpGet(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// Ask for an upgrade, as a WebSocket client would.
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
