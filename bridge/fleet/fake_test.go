package fleet_test

import (
	"sync"

	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeManager is the shared fake sandbox.Manager: its sandboxes are
// in-process agents that answer hello and claim on <AgentDir>/agent.sock
// and remember the tokens they were handed (sandboxtest.Agent.Claims).
type fakeManager = sandboxtest.Manager[*sandboxtest.Agent]

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
