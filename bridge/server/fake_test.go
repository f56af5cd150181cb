package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeManager is a sandbox.Manager whose sandboxes are in-process fake
// agents serving on <SocketDir>/agent.sock.
type fakeManager struct {
	mu             sync.Mutex
	createErr      error // returned by Create when set
	noAgent        bool  // Create starts no agent and the sandbox exits at once
	backlog        int   // when > 0, agents keep this many events and resume (resume_test.go)
	specs          []sandbox.Spec
	boxes          map[string]*fakeBox
	removed        []string
	volumesRemoved []string
	vols           map[string]map[string]string // live volumes and their labels
	n              int
}

type fakeBox struct {
	sb    sandbox.Sandbox
	agent *fakeAgent
}

func newFakeManager() *fakeManager {
	return &fakeManager{boxes: map[string]*fakeBox{}, vols: map[string]map[string]string{}}
}

func (m *fakeManager) Ping(context.Context) error { return nil }

func (m *fakeManager) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs = append(m.specs, spec)
	if m.createErr != nil {
		return sandbox.Sandbox{}, m.createErr
	}
	m.n++
	if spec.WorkspaceVolume != "" {
		m.vols[spec.WorkspaceVolume] = spec.Labels
	}
	sb := sandbox.Sandbox{ID: fmt.Sprintf("sb%d", m.n), Name: spec.Name, Image: spec.Image,
		Labels: spec.Labels, Running: !m.noAgent, ExitCode: 0, Created: time.Now()}
	if m.noAgent {
		sb.ExitCode = 3
	}
	box := &fakeBox{sb: sb}
	if !m.noAgent {
		a, err := startFakeAgent(spec.AgentDir, spec.SocketDir)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		box.agent = a
		a.keepBacklog(m.backlog) // resume_test.go
	}
	m.boxes[sb.ID] = box
	return sb, nil
}

func (m *fakeManager) Inspect(_ context.Context, id string) (sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	box, ok := m.boxes[id]
	if !ok {
		return sandbox.Sandbox{}, fmt.Errorf("inspect %s: %w", id, sandbox.ErrNotFound)
	}
	return box.sb, nil
}

func (m *fakeManager) Stop(_ context.Context, id string, _ time.Duration) error {
	m.kill(id, 0, false)
	return nil
}

func (m *fakeManager) Remove(_ context.Context, id string) error {
	m.mu.Lock()
	box := m.boxes[id]
	delete(m.boxes, id)
	m.removed = append(m.removed, id)
	m.mu.Unlock()
	if box != nil && box.agent != nil {
		box.agent.stop()
	}
	return nil
}

func (m *fakeManager) RemoveVolume(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.volumesRemoved = append(m.volumesRemoved, name)
	delete(m.vols, name)
	return nil
}

func (m *fakeManager) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sandbox.Sandbox
next:
	for _, b := range m.boxes {
		for k, v := range labels {
			if b.sb.Labels[k] != v {
				continue next
			}
		}
		out = append(out, b.sb)
	}
	return out, nil
}

func (m *fakeManager) ListVolumes(_ context.Context, labels map[string]string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
next:
	for name, l := range m.vols {
		for k, v := range labels {
			if l[k] != v {
				continue next
			}
		}
		out = append(out, name)
	}
	return out, nil
}

func (m *fakeManager) Close() error { return nil }

// Logs returns one line naming the exit code once the sandbox stopped.
func (m *fakeManager) Logs(_ context.Context, id string, _ int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	box := m.boxes[id]
	if box == nil {
		return "", fmt.Errorf("logs of %s: %w", id, sandbox.ErrNotFound)
	}
	if box.sb.Running {
		return "", nil
	}
	// Like a Go crash: the reason first, then a long stack.
	return fmt.Sprintf("{\"msg\":\"agent listening\"}\nfatal error: fake agent exiting with code %d\n\ngoroutine 1 [running]:\n%s",
		box.sb.ExitCode, strings.Repeat("main.frame()\n\t/agent/main.go:1\n", 40)), nil
}

// kill stops a sandbox's agent as if the container died.
func (m *fakeManager) kill(id string, code int, oom bool) {
	m.mu.Lock()
	box := m.boxes[id]
	if box != nil {
		box.sb.Running, box.sb.ExitCode, box.sb.OOMKilled = false, code, oom
	}
	m.mu.Unlock()
	if box != nil && box.agent != nil {
		box.agent.stop()
	}
}

func (m *fakeManager) state() (live int, specs []sandbox.Spec, removed, volumes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.boxes), append([]sandbox.Spec(nil), m.specs...),
		append([]string(nil), m.removed...), append([]string(nil), m.volumesRemoved...)
}

// fakeAgent speaks the agent side of the protocol: it answers hello, echoes
// a user_message as a turn whose text comes from the LLM proxy, and answers
// ping. Its own seq starts at 100, so renumbering is visible.
type fakeAgent struct {
	llmToken string
	srv      *http.Server
	llm      *http.Client
	done     chan struct{}
	once     sync.Once

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup
	seq   uint64
	seqMu sync.Mutex // guards seq and resume
	// resume, when set, keeps the newest events for a bridge's resume
	// (resume_test.go).
	resume *fakeResume
}

// envValue returns the value of key in KEY=VALUE pairs.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// startFakeAgent serves on agent.sock in agentDir, as the real agent does
// in its folder, and calls the LLM proxy on llm.sock in bridgeDir. Its LLM
// token comes with the bridge's claim (poolAnswer).
func startFakeAgent(agentDir, bridgeDir string) (*fakeAgent, error) {
	ln, err := net.Listen("unix", filepath.Join(agentDir, "agent.sock"))
	if err != nil {
		return nil, fmt.Errorf("fake agent listen: %w", err)
	}
	llmSock := filepath.Join(bridgeDir, "llm.sock")
	a := &fakeAgent{
		llm: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", llmSock)
			}}},
		done: make(chan struct{}), conns: map[*websocket.Conn]struct{}{}, seq: 99,
	}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go func() {
		defer close(a.done)
		_ = a.srv.Serve(ln)
	}()
	return a, nil
}

// stop closes the listener and every connection and waits for handlers.
func (a *fakeAgent) stop() {
	a.once.Do(func() {
		_ = a.srv.Close()
		<-a.done
		a.mu.Lock()
		for c := range a.conns {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
		a.llm.CloseIdleConnections()
	})
}

func (a *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns[conn] = struct{}{}
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()
	defer conn.Close()

	var hello wire.Envelope
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != wire.TypeHello {
		return
	}
	var h wire.Hello
	if err := hello.Decode(&h); err != nil || h.Role != wire.RoleBridge || h.Thread == "" {
		_ = conn.WriteJSON(wire.ErrorEnvelope("", "", wire.CodeBadMessage, "want a bridge hello with a thread"))
		return
	}
	_ = conn.WriteJSON(wire.MustNew(wire.TypeHello, h.Thread, "", wire.Hello{Version: wire.Version, Role: wire.RoleAgent, Software: "fake-agent"}))
	for {
		var env wire.Envelope
		if err := conn.ReadJSON(&env); err != nil {
			return
		}
		for _, out := range a.answer(env) {
			if err := conn.WriteJSON(out); err != nil {
				return
			}
		}
	}
}

func (a *fakeAgent) event(typ wire.Type, id string, payload any) wire.Envelope {
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	a.seq++
	env := wire.MustNew(typ, "", id, payload)
	env.Seq = a.seq
	a.resume.keep(env)
	return env
}

func (a *fakeAgent) answer(env wire.Envelope) []wire.Envelope {
	if out, ok := a.approvalAnswer(env); ok { // approvals_test.go
		return out
	}
	if out, ok := a.lifecycleAnswer(env); ok { // lifecycle_test.go
		return out
	}
	if out, ok := a.poolAnswer(env); ok { // pool_test.go
		return out
	}
	if out, ok := a.resumeAnswer(env); ok { // resume_test.go
		return out
	}
	if out, ok := a.inflightAnswer(env); ok { // inflight_test.go
		return out
	}
	if out, ok := a.gapAnswer(env); ok { // inflight_test.go
		return out
	}
	if out, ok := a.turnEndAnswer(env); ok { // turnend_test.go
		return out
	}
	switch env.Type {
	case wire.TypePing:
		return []wire.Envelope{wire.MustNew(wire.TypePong, "", env.ID, nil)}
	case wire.TypeInterrupt:
		return []wire.Envelope{a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonInterrupted})}
	case wire.TypeUserMessage:
		var m wire.UserMessage
		if err := env.Decode(&m); err != nil {
			return []wire.Envelope{wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "%v", err)}
		}
		out := []wire.Envelope{a.event(wire.TypeUserEcho, env.ID, m)}
		if n, ok := strings.CutPrefix(m.Text, "flood "); ok {
			var count int
			fmt.Sscan(n, &count)
			chunk := strings.Repeat("x", 16<<10)
			for range count {
				out = append(out, a.event(wire.TypeAssistantDelta, env.ID, wire.Text{Text: chunk}))
			}
			return append(out, a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop}))
		}
		text, err := a.askModel(m.Text)
		if err != nil {
			return append(out, a.event(wire.TypeError, env.ID, wire.Error{Code: wire.CodeLLM, Message: err.Error()}),
				a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonError}))
		}
		return append(out,
			a.event(wire.TypeAssistantDelta, env.ID, wire.Text{Text: text}),
			a.event(wire.TypeAssistantMessage, env.ID, wire.Text{Text: text}),
			a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop}))
	}
	return []wire.Envelope{wire.ErrorEnvelope("", env.ID, wire.CodeUnknownType, "fake agent: %s", env.Type)}
}

// askModel calls the bridge's LLM proxy the way the real agent does, with a
// made-up key that the proxy must replace.
func (a *fakeAgent) askModel(text string) (string, error) {
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, text)
	req, err := http.NewRequest(http.MethodPost, "http://boxwire-llm/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	tok := a.llmToken // from the claim (poolAnswer)
	a.mu.Unlock()
	req.Header.Set("Authorization", "Bearer "+tok) // the sandbox's proxy token, not a key
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.llm.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("llm status %d: %s", resp.StatusCode, data)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return "", errors.New("bad llm answer: " + string(data))
	}
	return out.Choices[0].Message.Content, nil
}
