// Package recordstore keeps the bridge's thread records (records.Store,
// what the fleet and the server read and write about each thread): in
// the bridge's store (Over: a store.Backend, the bbolt file or
// PostgreSQL, so threads survive a restart) or in memory (NewMem, for
// tests). It is the one place thread records meet the store's types.
package recordstore

import (
	"context"
	"sort"
	"sync"

	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/store"
)

// mem is the in-memory records.Store.
type mem struct {
	mu   sync.Mutex
	recs map[string]records.Thread
}

// NewMem returns an empty in-memory records.Store; it forgets everything
// when the process ends. It is safe for concurrent use.
func NewMem() records.Store { return &mem{recs: map[string]records.Thread{}} }

func (m *mem) Put(_ context.Context, rec records.Thread) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.ID] = rec
	return nil
}

func (m *mem) Get(_ context.Context, id string) (records.Thread, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[id]
	return rec, ok, nil
}

// List returns every record, oldest (by Created) first.
func (m *mem) List(context.Context) ([]records.Thread, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]records.Thread, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

func (m *mem) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}

// backend is the records.Store of a store.Backend.
type backend struct{ st store.Backend }

// Over returns the records.Store over st: thread records there outlive
// the process, and deleting one also deletes its thread's events.
func Over(st store.Backend) records.Store { return backend{st} }

func (b backend) Put(_ context.Context, r records.Thread) error {
	return b.st.PutThread(store.Thread{ID: r.ID, Box: r.Box, Scope: r.Scope, Assistant: r.Assistant,
		Image: r.Image, Runtime: r.Runtime, Created: r.Created, IdleTTL: r.IdleTTL, Egress: r.Egress,
		Suspended: r.Suspended, SuspendedFor: r.SuspendedFor, Policy: r.Policy, MCP: r.MCP, Owner: r.Owner})
}

func (b backend) Get(_ context.Context, id string) (records.Thread, bool, error) {
	t, ok, err := b.st.Thread(id)
	return recordOf(t), ok, err
}

func (b backend) List(context.Context) ([]records.Thread, error) {
	ts, err := b.st.Threads()
	out := make([]records.Thread, 0, len(ts))
	for _, t := range ts {
		out = append(out, recordOf(t))
	}
	return out, err
}

// Delete removes the record and the thread's events.
func (b backend) Delete(_ context.Context, id string) error { return b.st.DeleteThread(id) }

func recordOf(t store.Thread) records.Thread {
	return records.Thread{ID: t.ID, Box: t.Box, Scope: t.Scope, Assistant: t.Assistant,
		Image: t.Image, Runtime: t.Runtime, Created: t.Created, IdleTTL: t.IdleTTL, Egress: t.Egress,
		Suspended: t.Suspended, SuspendedFor: t.SuspendedFor, Policy: t.Policy, MCP: t.MCP, Owner: t.Owner}
}
