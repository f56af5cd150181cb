package fleet_test

import (
	"context"
	"sort"
	"sync"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeManager is the shared fake sandbox.Manager: its sandboxes are
// in-process agents that answer hello and claim on <AgentDir>/agent.sock
// and remember the tokens they were handed (sandboxtest.Agent.Claims).
type fakeManager = sandboxtest.Manager[*sandboxtest.Agent]

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
