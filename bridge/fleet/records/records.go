package records

import (
	"context"
	"encoding/json"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Thread is what the bridge keeps about a thread apart from its live
// connections: enough to find its sandbox again after a restart.
type Thread struct {
	ID        string
	Box       string // the sandbox's box id (see sandbox.LabelBox)
	Scope     wire.Scope
	Assistant string
	Image     string
	Runtime   string
	Created   time.Time
	// Suspended is when the thread's sandbox was suspended; nil while the
	// thread has one (fleet/suspend.go). SuspendedFor says why.
	Suspended    *time.Time
	SuspendedFor wire.ExitReason
	// IdleTTL is the thread's own idle TTL; adoption applies it to a
	// sandbox the warm pool started (fleet/pool.go). Zero: the sandbox's label.
	IdleTTL time.Duration
	// Egress are the thread's sandbox's egress rules beside the bridge's
	// (fleet/egress.go); adoption gives them back to the sandbox.
	Egress []string
	// Policy is the thread's own approval policy (CreateThread.Policy),
	// kept for the server; the fleet does not read it.
	Policy json.RawMessage
	// MCP declares the thread's own MCP servers (CreateThread.MCP), kept
	// for the server; the fleet does not read it.
	MCP json.RawMessage
	// Owner is the user the thread belongs to; "" for threads made before
	// users existed, which are the admin's. The fleet does not read it.
	Owner string
}

// Store keeps thread records. The fleet and the server call it from
// many goroutines; implementations must be safe for concurrent use. Get
// reports a missing record with ok false, not an error.
type Store interface {
	Put(ctx context.Context, rec Thread) error
	Get(ctx context.Context, id string) (rec Thread, ok bool, err error)
	List(ctx context.Context) ([]Thread, error)
	Delete(ctx context.Context, id string) error
}
