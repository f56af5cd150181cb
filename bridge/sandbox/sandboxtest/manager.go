package sandboxtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Stopper is the agent of one fake sandbox: Stop ends it (the sandbox
// stopped or was removed) and waits for its goroutines.
type Stopper interface{ Stop() }

// Manager is a fake sandbox.Manager whose sandboxes run agents of type A,
// started by the function given to NewManager. It is safe for concurrent
// use.
type Manager[A Stopper] struct {
	start func(spec sandbox.Spec) (A, error)

	mu             sync.Mutex
	createErr      error // returned by Create when set
	noAgent        bool  // Create starts no agent and the sandbox exits at once
	n              int
	specs          []sandbox.Spec // every Create's spec, in order
	boxes          map[string]*fakeBox[A]
	removed        []string                     // sandbox ids Remove was asked for, in order
	volumesRemoved []string                     // volume names RemoveVolume was asked for, in order
	vols           map[string]map[string]string // live volumes and their labels
}

type fakeBox[A Stopper] struct {
	sb       sandbox.Sandbox
	spec     sandbox.Spec
	agent    A
	hasAgent bool
}

var _ sandbox.Manager = (*Manager[*Agent])(nil)

// NewManager returns a Manager whose Create starts each sandbox's agent
// with start (on spec.AgentDir; the spec's SocketDir is the bridge's
// folder with the LLM proxy).
func NewManager[A Stopper](start func(spec sandbox.Spec) (A, error)) *Manager[A] {
	return &Manager[A]{start: start, boxes: map[string]*fakeBox[A]{}, vols: map[string]map[string]string{}}
}

// NewFake returns a Manager whose sandboxes run plain Agents that answer
// nothing past the greeting.
func NewFake() *Manager[*Agent] {
	return NewManager(func(spec sandbox.Spec) (*Agent, error) { return StartAgent(spec.AgentDir, nil) })
}

// SetCreateErr makes every Create fail with err (nil: succeed again).
func (m *Manager[A]) SetCreateErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.createErr = err
}

// SetNoAgent makes Create start no agent (on: true): the sandbox has
// exited with code 3 when Create returns.
func (m *Manager[A]) SetNoAgent(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noAgent = on
}

// Ping reports the fake engine up.
func (m *Manager[A]) Ping(context.Context) error { return nil }

// Create records spec and its volume and starts the sandbox's agent.
func (m *Manager[A]) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
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
		Labels: spec.Labels, Running: !m.noAgent, Created: time.Now()}
	box := &fakeBox[A]{sb: sb, spec: spec}
	if m.noAgent {
		box.sb.ExitCode = 3
	} else {
		a, err := m.start(spec)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		box.agent, box.hasAgent = a, true
	}
	m.boxes[sb.ID] = box
	return box.sb, nil
}

// Inspect returns sandbox id as it is now, or sandbox.ErrNotFound.
func (m *Manager[A]) Inspect(_ context.Context, id string) (sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	box, ok := m.boxes[id]
	if !ok {
		return sandbox.Sandbox{}, fmt.Errorf("inspect %s: %w", id, sandbox.ErrNotFound)
	}
	return box.sb, nil
}

// Stop stops sandbox id's agent; the sandbox stays, stopped with code 0.
func (m *Manager[A]) Stop(_ context.Context, id string, _ time.Duration) error {
	m.Kill(id, 0, false)
	return nil
}

// Kill stops sandbox id's agent as if the container died with code (oom:
// the engine's OOM flag); the sandbox stays, stopped.
func (m *Manager[A]) Kill(id string, code int, oom bool) {
	m.mu.Lock()
	box := m.boxes[id]
	if box != nil {
		box.sb.Running, box.sb.ExitCode, box.sb.OOMKilled = false, code, oom
	}
	m.mu.Unlock()
	if box != nil && box.hasAgent {
		box.agent.Stop()
	}
}

// Remove records the removal of sandbox id and stops its agent.
func (m *Manager[A]) Remove(_ context.Context, id string) error {
	m.mu.Lock()
	box := m.boxes[id]
	delete(m.boxes, id)
	m.removed = append(m.removed, id)
	m.mu.Unlock()
	if box != nil && box.hasAgent {
		box.agent.Stop()
	}
	return nil
}

// RemoveVolume records the removal of volume name.
func (m *Manager[A]) RemoveVolume(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.volumesRemoved = append(m.volumesRemoved, name)
	delete(m.vols, name)
	return nil
}

// List returns the sandboxes with every one of labels, by id.
func (m *Manager[A]) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
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

// ListVolumes returns the live volumes with every one of labels, sorted.
func (m *Manager[A]) ListVolumes(_ context.Context, labels map[string]string) ([]string, error) {
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

// Logs returns one line naming the exit code once the sandbox stopped,
// like a Go crash: the reason first, then a long stack.
func (m *Manager[A]) Logs(_ context.Context, id string, _ int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	box := m.boxes[id]
	if box == nil {
		return "", fmt.Errorf("logs of %s: %w", id, sandbox.ErrNotFound)
	}
	if box.sb.Running {
		return "", nil
	}
	return fmt.Sprintf("{\"msg\":\"agent listening\"}\nfatal error: fake agent exiting with code %d\n\ngoroutine 1 [running]:\n%s",
		box.sb.ExitCode, strings.Repeat("main.frame()\n\t/agent/main.go:1\n", 40)), nil
}

// Close does nothing: the agents stop with their sandboxes (StopAll).
func (m *Manager[A]) Close() error { return nil }

// State returns how many sandboxes exist, every Create's spec, and the
// sandboxes and volumes removed, in order.
func (m *Manager[A]) State() (live int, specs []sandbox.Spec, removed, volumes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.boxes), append([]sandbox.Spec(nil), m.specs...),
		append([]string(nil), m.removed...), append([]string(nil), m.volumesRemoved...)
}

// Live returns the specs of the sandboxes that exist, by sandbox id.
func (m *Manager[A]) Live() map[string]sandbox.Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]sandbox.Spec{}
	for id, b := range m.boxes {
		out[id] = b.spec
	}
	return out
}

// Agent returns the agent of sandbox id; ok is false when the sandbox is
// gone or started none.
func (m *Manager[A]) Agent(id string) (a A, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, found := m.boxes[id]; found && b.hasAgent {
		return b.agent, true
	}
	return a, false
}

// Agents returns the agents of the sandboxes that exist, by sandbox id.
func (m *Manager[A]) Agents() []A {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.boxes))
	for id, b := range m.boxes {
		if b.hasAgent {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	out := make([]A, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.boxes[id].agent)
	}
	return out
}

// StopAll stops every agent (a test's cleanup); the sandboxes stay.
func (m *Manager[A]) StopAll() {
	for _, a := range m.Agents() {
		a.Stop()
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
