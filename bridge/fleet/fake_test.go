package fleet_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeManager is a sandbox.Manager whose sandboxes are in-process agents
// that answer hello and claim on <AgentDir>/agent.sock.
type fakeManager struct {
	mu       sync.Mutex
	n        int
	boxes    map[string]*fakeBox
	vols     map[string]map[string]string // live volumes and their labels
	removed  []string                     // sandbox ids, in order
	volsGone []string
}

type fakeBox struct {
	sb    sandbox.Sandbox
	spec  sandbox.Spec
	agent *fakeAgent
}

func newFakeManager() *fakeManager {
	return &fakeManager{boxes: map[string]*fakeBox{}, vols: map[string]map[string]string{}}
}

func (m *fakeManager) Ping(context.Context) error { return nil }

func (m *fakeManager) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	if spec.WorkspaceVolume != "" {
		m.vols[spec.WorkspaceVolume] = spec.Labels
	}
	sb := sandbox.Sandbox{ID: fmt.Sprintf("sb%d", m.n), Name: spec.Name, Image: spec.Image,
		Labels: spec.Labels, Running: true, Created: time.Now()}
	a, err := startFakeAgent(spec.AgentDir)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	m.boxes[sb.ID] = &fakeBox{sb: sb, spec: spec, agent: a}
	return sb, nil
}

func (m *fakeManager) Inspect(_ context.Context, id string) (sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.boxes[id]
	if !ok {
		return sandbox.Sandbox{}, fmt.Errorf("inspect %s: %w", id, sandbox.ErrNotFound)
	}
	return b.sb, nil
}

func (m *fakeManager) Stop(ctx context.Context, id string, _ time.Duration) error {
	m.kill(id)
	return nil
}

// kill stops sandbox id's agent; the sandbox stays, stopped.
func (m *fakeManager) kill(id string) {
	m.mu.Lock()
	b, ok := m.boxes[id]
	if ok {
		b.sb.Running = false
	}
	m.mu.Unlock()
	if ok {
		b.agent.stop()
	}
}

func (m *fakeManager) Remove(_ context.Context, id string) error {
	m.mu.Lock()
	b, ok := m.boxes[id]
	delete(m.boxes, id)
	if ok {
		m.removed = append(m.removed, id)
	}
	m.mu.Unlock()
	if ok {
		b.agent.stop()
	}
	return nil
}

func (m *fakeManager) Logs(context.Context, string, int) (string, error) { return "", nil }

func (m *fakeManager) RemoveVolume(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.vols[name]; ok {
		delete(m.vols, name)
		m.volsGone = append(m.volsGone, name)
	}
	return nil
}

func (m *fakeManager) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sandbox.Sandbox
	for _, b := range m.boxes {
		if hasLabels(b.sb.Labels, labels) {
			out = append(out, b.sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *fakeManager) ListVolumes(_ context.Context, labels map[string]string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name, l := range m.vols {
		if hasLabels(l, labels) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *fakeManager) Close() error { return nil }

// live returns how many sandboxes exist and the specs of them, by id.
func (m *fakeManager) live() map[string]sandbox.Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]sandbox.Spec{}
	for id, b := range m.boxes {
		out[id] = b.spec
	}
	return out
}

// agentOf returns sandbox id's agent.
func (m *fakeManager) agentOf(id string) *fakeAgent {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.boxes[id]; ok {
		return b.agent
	}
	return nil
}

// stopAll stops every agent (the test's cleanup).
func (m *fakeManager) stopAll() {
	m.mu.Lock()
	var as []*fakeAgent
	for _, b := range m.boxes {
		as = append(as, b.agent)
	}
	m.mu.Unlock()
	for _, a := range as {
		a.stop()
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// fakeAgent answers a bridge's hello and claim, as the real agent does,
// and remembers the tokens it was handed.
type fakeAgent struct {
	srv  *http.Server
	done chan struct{}
	once sync.Once

	mu     sync.Mutex
	conns  map[*websocket.Conn]struct{}
	tokens []string
	wg     sync.WaitGroup
}

func startFakeAgent(agentDir string) (*fakeAgent, error) {
	ln, err := net.Listen("unix", filepath.Join(agentDir, fleet.AgentSocket))
	if err != nil {
		return nil, fmt.Errorf("fake agent listen: %w", err)
	}
	a := &fakeAgent{done: make(chan struct{}), conns: map[*websocket.Conn]struct{}{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go func() { // waited for by stop
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
	})
}

// claims returns the LLM tokens the agent was handed, oldest first.
func (a *fakeAgent) claims() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.tokens...)
}

func (a *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
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
		if env.Type != wire.TypeClaim {
			continue
		}
		var c wire.Claim
		_ = env.Decode(&c)
		a.mu.Lock()
		a.tokens = append(a.tokens, c.LLMToken)
		a.mu.Unlock()
		_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, env.Thread, env.ID, struct{}{}))
	}
}

// memRecords is an in-memory fleet.Records.
type memRecords struct {
	mu   sync.Mutex
	recs map[string]fleet.ThreadRecord
}

func newMemRecords() *memRecords { return &memRecords{recs: map[string]fleet.ThreadRecord{}} }

func (m *memRecords) Put(_ context.Context, r fleet.ThreadRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[r.ID] = r
	return nil
}

func (m *memRecords) Get(_ context.Context, id string) (fleet.ThreadRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[id]
	return r, ok, nil
}

func (m *memRecords) List(context.Context) ([]fleet.ThreadRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]fleet.ThreadRecord, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *memRecords) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}

// member is a fleet.Member that records what the fleet tells it.
type member struct {
	id string

	mu        sync.Mutex
	published []wire.Envelope
	suspended []wire.SandboxExited
}

func (m *member) ID() string     { return m.id }
func (m *member) Working() bool  { return false }
func (m *member) Attached() bool { return false }

func (m *member) Publish(env wire.Envelope) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.published = append(m.published, env)
}

func (m *member) Suspend(ev wire.SandboxExited) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.suspended = append(m.suspended, ev)
}
