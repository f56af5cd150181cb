package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Lease says which bridge relays a thread (holds its agent connection)
// until when (issue 22; docs/store.md, "Leases"). Epoch grows by one each
// time the lease passes to a holder (a new tenure: after a release, an
// expiry or a first acquire); renewals keep it. A write that carries the
// epoch it was made under can be told from a stale holder's.
type Lease struct {
	Thread  string    `json:"thread"`
	Holder  string    `json:"holder"`
	Epoch   uint64    `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// Bridge is where the other bridges on the store reach a bridge: its
// Address (a base URL, http://host:port) for the clients it forwards to
// the threads it relays.
type Bridge struct {
	ID      string    `json:"id"`
	Address string    `json:"address"`
	Updated time.Time `json:"updated"`
}

var (
	// ErrLeaseHeld is AcquireLease's refusal: another holder's lease has
	// not expired.
	ErrLeaseHeld = errors.New("lease held by another bridge")
	// ErrLeaseLost is RenewLease's refusal: the caller's lease expired or
	// passed to another holder; it must stop relaying the thread.
	ErrLeaseLost = errors.New("lease lost")
)

// memLeases are the bbolt store's leases. One process has the file open
// (ErrLocked), so every holder is in this process and the leases need not
// outlive it: they live in memory, with the same semantics as the
// PostgreSQL store's table (storetest checks both).
type memLeases struct {
	mu      sync.Mutex
	leases  map[string]Lease // by thread, expired ones included (their epochs)
	bridges map[string]Bridge
}

// PutBridge announces b (an empty Address forgets it).
func (s *Store) PutBridge(_ context.Context, b Bridge) error {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bridges == nil {
		m.bridges = map[string]Bridge{}
	}
	if b.Address == "" {
		delete(m.bridges, b.ID)
		return nil
	}
	b.Updated = time.Now()
	m.bridges[b.ID] = b
	return nil
}

// Bridges lists the announced bridges, by id.
func (s *Store) Bridges(context.Context) ([]Bridge, error) {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Bridge, 0, len(m.bridges))
	for _, b := range m.bridges {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// AcquireLease takes the thread's lease for holder until ttl from now, or
// renews it when holder has it. When another holder's lease has not
// expired it fails with ErrLeaseHeld and returns that lease.
func (s *Store) AcquireLease(_ context.Context, thread, holder string, ttl time.Duration) (Lease, error) {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	l, ok := m.leases[thread]
	live := ok && now.Before(l.Expires)
	if live && l.Holder != holder {
		return l, fmt.Errorf("lease of %s: %w (%s)", thread, ErrLeaseHeld, l.Holder)
	}
	if !live || l.Holder != holder {
		l.Epoch++
	}
	l.Thread, l.Holder, l.Expires = thread, holder, now.Add(ttl)
	if m.leases == nil {
		m.leases = map[string]Lease{}
	}
	m.leases[thread] = l
	return l, nil
}

// RenewLease extends holder's unexpired lease of thread to ttl from now;
// it fails with ErrLeaseLost when holder has none.
func (s *Store) RenewLease(_ context.Context, thread, holder string, ttl time.Duration) (Lease, error) {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	l, ok := m.leases[thread]
	if !ok || l.Holder != holder || !now.Before(l.Expires) {
		return Lease{}, fmt.Errorf("lease of %s: %w", thread, ErrLeaseLost)
	}
	l.Expires = now.Add(ttl)
	m.leases[thread] = l
	return l, nil
}

// ReleaseLease gives up holder's lease of thread at once; not holding it
// is not an error.
func (s *Store) ReleaseLease(_ context.Context, thread, holder string) error {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[thread]; ok && l.Holder == holder && time.Now().Before(l.Expires) {
		l.Expires = time.Now()
		m.leases[thread] = l
	}
	return nil
}

// Leases returns every unexpired lease, by thread.
func (s *Store) Leases(context.Context) ([]Lease, error) {
	m := &s.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var out []Lease
	for _, l := range m.leases {
		if now.Before(l.Expires) {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Thread < out[j].Thread })
	return out, nil
}

// drop forgets the leases of deleted threads.
func (m *memLeases) drop(ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.leases, id)
	}
}
