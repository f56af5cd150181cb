package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/e2e/llmscript"
	openai "github.com/sashabaranov/go-openai"
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

// buildBridge builds the bridge into dir and returns its path, or returns
// BOXWIRE_E2E_BRIDGE, a bridge built elsewhere (another commit's, to
// compare it with this one under the same suite), as it is.
func buildBridge(dir string) (string, error) {
	if bin := os.Getenv("BOXWIRE_E2E_BRIDGE"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "bridge")
	args := []string{"build", "-o", bin}
	if !benchEnabled { // benchmarks measure the binary users run
		args = append(args, "-race")
	}
	if benchEnabled { // a pprof socket, served only when BOXWIRE_PPROF_SOCKET is set (bridge/pprof.go): profiles, and the scale figure's garbage collections
		args = append(args, "-tags", "boxwire_pprof")
	}
	build := exec.Command("go", append(args, "github.com/boxwire/boxwire/bridge")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	return bin, build.Run()
}

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
	if bridgeBin, err = buildBridge(dir); err != nil {
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

// threadInfo is GET /v1/threads/{id}.
func (e *env) threadInfo(id string) wire.ThreadInfo {
	e.t.Helper()
	var info wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+id, nil, &info); code != http.StatusOK {
		e.t.Fatalf("GET thread %s: %d", id, code)
	}
	return info
}

// setEgress replaces thread id's egress rules through the client library.
func (e *env) setEgress(id string, rules []string) (wire.ThreadInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	return chat.SetEgress(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token}, id, rules)
}

// lastChat returns the messages of the newest chat request the scripted
// model got that had any (nil when none had), and them as role:content
// for failure messages.
func (e *env) lastChat() ([]openai.ChatCompletionMessage, string) {
	reqs := e.llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if msgs := reqs[i].Chat.Messages; len(msgs) > 0 {
			all := make([]string, len(msgs))
			for k, m := range msgs {
				all[k] = m.Role + ":" + m.Content
			}
			return msgs, strings.Join(all, " | ")
		}
	}
	return nil, "no chat request"
}

// said reports whether one of msgs has role and contains s.
func said(msgs []openai.ChatCompletionMessage, role, s string) bool {
	return slices.ContainsFunc(msgs, func(m openai.ChatCompletionMessage) bool {
		return m.Role == role && strings.Contains(m.Content, s)
	})
}

// lastChatHas reports whether the model's newest chat request has a user
// message containing each of want and none containing any of not; it also
// returns the request's messages for failure messages.
func (e *env) lastChatHas(want, not []string) (bool, string) {
	msgs, all := e.lastChat()
	if msgs == nil {
		return false, all
	}
	has := func(s string) bool { return said(msgs, "user", s) }
	ok := !slices.ContainsFunc(not, has)
	for _, w := range want {
		ok = ok && has(w)
	}
	return ok, all
}

// exportSeqs reads the thread's transcript through the export endpoint
// (client/chat.ExportEvents) and returns its seqs in order.
func (e *env) exportSeqs(thread string) []uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	var buf bytes.Buffer
	if _, err := chat.ExportEvents(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token}, thread, 0, &buf); err != nil {
		e.t.Fatalf("export: %v", err)
	}
	var seqs []uint64
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		env, err := wire.Parse(line)
		if err != nil {
			e.t.Fatalf("export line %q: %v", line, err)
		}
		seqs = append(seqs, env.Seq)
	}
	return seqs
}

// rememberedIn reports whether the newest chat request the scripted model
// got carries a user message containing user and an assistant message
// containing assistant: the conversation from before a replacement.
func (e *env) rememberedIn(user, assistant string) (bool, string) {
	msgs, all := e.lastChat()
	return said(msgs, "user", user) && said(msgs, "assistant", assistant), all
}

// workspaceDir is where a bridge on dataDir keeps its capped workspaces'
// image files (bridge/options.go).
func workspaceDir(dataDir string) string { return filepath.Join(dataDir, "workspaces") }

// workspaceLeftovers lists the image files and links in this bridge's
// workspace folder and the loop devices backed by a file in its data
// folder: what a removed workspace must not leave. The spare image a
// running bridge keeps formatted for its next workspace (*.spare,
// bridge/sandbox/workspace_spare.go) is not one; its Close and bridge gc
// remove it.
func (e *env) workspaceLeftovers() []string {
	e.t.Helper()
	all, err := filepath.Glob(filepath.Join(workspaceDir(e.dataDir), "*"))
	if err != nil {
		e.t.Fatalf("workspace folder: %v", err)
	}
	var left []string
	for _, p := range all {
		if !strings.HasSuffix(p, ".spare") {
			left = append(left, p)
		}
	}
	devs, err := sandbox.LoopDevicesUnder(e.dataDir)
	if err != nil {
		e.t.Fatalf("loop devices: %v", err)
	}
	return append(left, devs...)
}

// detachLoops detaches every loop device backed by a file in this bridge's
// data folder (a mounted one detaches when it is unmounted) and returns
// them.
func (e *env) detachLoops() []string {
	e.t.Helper()
	devs, err := sandbox.LoopDevicesUnder(e.dataDir)
	if err != nil {
		e.t.Fatalf("loop devices: %v", err)
	}
	for _, d := range devs {
		if out, err := exec.Command("losetup", "--detach", d).CombinedOutput(); err != nil {
			e.t.Fatalf("losetup --detach %s: %v %s", d, err, out)
		}
	}
	return devs
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
	if w := e.workspaceLeftovers(); len(w) != 0 {
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

// waitFor polls cond until it holds; it fails the test, naming what, when
// eventTimeout passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, eventTimeout, cond)
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
