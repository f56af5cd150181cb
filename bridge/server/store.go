package server

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// ThreadRecord is what the bridge keeps about a thread apart from its live
// connections: enough to find its sandbox again after a restart.
type ThreadRecord struct {
	ID        string
	Box       string // the sandbox's box id (see sandbox.LabelBox)
	Scope     wire.Scope
	Assistant string
	Image     string
	Runtime   string
	Created   time.Time
}

// ThreadStore keeps thread records. The bridge calls it from many
// goroutines; implementations must be safe for concurrent use. Get reports
// a missing record with ok false, not an error. The in-memory store is the
// default; a persistent one lets threads of shared (assistant) sandboxes
// survive a restart, since container labels name only one thread.
type ThreadStore interface {
	Put(ctx context.Context, rec ThreadRecord) error
	Get(ctx context.Context, id string) (rec ThreadRecord, ok bool, err error)
	List(ctx context.Context) ([]ThreadRecord, error)
	Delete(ctx context.Context, id string) error
}

// memStore is the in-memory ThreadStore.
type memStore struct {
	mu   sync.Mutex
	recs map[string]ThreadRecord
}

// NewMemStore returns an empty in-memory ThreadStore; it forgets everything
// when the process ends.
func NewMemStore() ThreadStore { return &memStore{recs: map[string]ThreadRecord{}} }

func (m *memStore) Put(_ context.Context, rec ThreadRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.ID] = rec
	return nil
}

func (m *memStore) Get(_ context.Context, id string) (ThreadRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[id]
	return rec, ok, nil
}

func (m *memStore) List(context.Context) ([]ThreadRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ThreadRecord, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

func (m *memStore) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}
