package server

import (
	"context"
	"sort"
	"sync"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// ThreadRecord is what the bridge keeps about a thread apart from its live
// connections: enough to find its sandbox again after a restart
// (bridge/fleet reads it too).
type ThreadRecord = fleet.ThreadRecord

// ThreadStore keeps thread records. The bridge calls it from many
// goroutines; implementations must be safe for concurrent use. Get reports
// a missing record with ok false, not an error. The default is the
// bridge's store file (<DataDir>/boxwire.db, bridge/store), so threads —
// also those of shared (assistant) sandboxes, which container labels do not
// name — survive a restart; NewMemStore is for tests.
type ThreadStore = fleet.Records

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

// eventStore keeps threads' events (every store.Backend implements it).
type eventStore interface {
	// Append queues env for the thread's log without blocking (unless the
	// queue is full) and calls done once it is committed or failed.
	Append(thread string, env wire.Envelope, done func(error))
	// Events returns up to limit stored events with seq > after.
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
	// LastSeq is the seq of the thread's newest stored event.
	LastSeq(thread string) (uint64, error)
	// Flush waits until every queued append is committed.
	Flush()
	// SaveCursor queues the thread's agent cursor behind the appends
	// queued before it (resume.go); Cursor reads the stored one.
	SaveCursor(thread string, c store.Cursor)
	Cursor(thread string) (c store.Cursor, ok bool, err error)
	// SaveInflight queues the thread's requests in flight the same way
	// (inflight.go); Inflight reads the stored ones.
	SaveInflight(thread string, reqs []wire.Envelope)
	Inflight(thread string) ([]wire.Envelope, error)
}

// backendThreads is the ThreadStore of the bridge's store (bbolt file or
// PostgreSQL): thread records there outlive the process.
type backendThreads struct{ st store.Backend }

func (b backendThreads) Put(_ context.Context, r ThreadRecord) error {
	return b.st.PutThread(store.Thread{ID: r.ID, Box: r.Box, Scope: r.Scope, Assistant: r.Assistant,
		Image: r.Image, Runtime: r.Runtime, Created: r.Created, IdleTTL: r.IdleTTL, Egress: r.Egress,
		Suspended: r.Suspended, SuspendedFor: r.SuspendedFor, Policy: r.Policy, Owner: r.Owner})
}

func (b backendThreads) Get(_ context.Context, id string) (ThreadRecord, bool, error) {
	t, ok, err := b.st.Thread(id)
	return recordOf(t), ok, err
}

func (b backendThreads) List(context.Context) ([]ThreadRecord, error) {
	ts, err := b.st.Threads()
	out := make([]ThreadRecord, 0, len(ts))
	for _, t := range ts {
		out = append(out, recordOf(t))
	}
	return out, err
}

// Delete removes the record and the thread's events.
func (b backendThreads) Delete(_ context.Context, id string) error { return b.st.DeleteThread(id) }

func recordOf(t store.Thread) ThreadRecord {
	return ThreadRecord{ID: t.ID, Box: t.Box, Scope: t.Scope, Assistant: t.Assistant,
		Image: t.Image, Runtime: t.Runtime, Created: t.Created, IdleTTL: t.IdleTTL, Egress: t.Egress,
		Suspended: t.Suspended, SuspendedFor: t.SuspendedFor, Policy: t.Policy, Owner: t.Owner}
}
