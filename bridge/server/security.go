package server

import (
	"io"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// hardFrameBytes is the largest frame a client may send at all: a frame
// over wire.MaxMessageBytes but under this is drained and answered
// too_large; a larger one closes the connection with 1009 (message too
// big) without being read, and the bridge carries on.
const hardFrameBytes = 16 << 20

// refuseBinary drains a binary frame that is not a terminal frame and
// answers it with a bad_message error; the connection stays.
func (c *client) refuseBinary(t *thread, r io.Reader) {
	_, _ = io.Copy(io.Discard, r)
	c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeBadMessage,
		"binary frames carry terminal data only; send requests as JSON text frames"))
}

// PosturePolicy is what a sandbox's agent must report in its hello (see
// wire.Posture) for the bridge to use it (bridge/fleet checks it).
type PosturePolicy = fleet.PosturePolicy

// StrictPosture requires everything the bridge configures.
func StrictPosture() *PosturePolicy { return fleet.StrictPosture() }
