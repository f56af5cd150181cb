package server

import (
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/readiness"
)

// DefaultLeaseTTL is how long a bridge's leases last unrenewed
// (Config.LeaseTTL); they are renewed every third of it.
const DefaultLeaseTTL = lease.DefaultTTL

// ErrBridgeIDInUse is New's refusal when another running bridge has this
// bridge's id (its lease in the store is renewed).
var ErrBridgeIDInUse = lease.ErrBridgeIDInUse

// readyTimeout bounds each question to the store or the engine that must
// be answered at once (GET /readyz's, a scrape's).
const readyTimeout = readiness.Timeout
