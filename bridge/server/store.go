package server

import (
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/recordstore"
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
// bridge's store (recordstore.Over its store.Backend), so threads —
// also those of shared (assistant) sandboxes, which container labels do not
// name — survive a restart; NewMemStore is for tests.
type ThreadStore = fleet.Records

// NewMemStore returns an empty in-memory ThreadStore; it forgets everything
// when the process ends (bridge/recordstore).
func NewMemStore() ThreadStore { return recordstore.NewMem() }

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
