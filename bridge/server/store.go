package server

import (
	"github.com/boxwire/boxwire/bridge/agentlink"
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

// eventStore keeps threads' events (every store.Backend implements it):
// what the agent link reads and queues (agentlink.Store: events, the
// agent cursor, requests in flight), and appending to a thread's log.
type eventStore interface {
	agentlink.Store
	// AppendGroup queues events for the thread's log, and the thread's
	// agent cursor that covers them (when not nil), to be committed in one
	// transaction, without blocking (unless the queue is full); done is
	// called once they are committed or failed.
	AppendGroup(thread string, evs []wire.Envelope, c *store.Cursor, done func(error))
	// LastSeq is the seq of the thread's newest stored event.
	LastSeq(thread string) (uint64, error)
}
