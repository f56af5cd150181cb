package threadops

import (
	"errors"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// WireError is err, a failure to make, resume or find a thread, as the
// error its client is sent (over the WebSocket or the threads API): a
// wire.Error in err as it is; the sandbox limit (fleet.ErrLimit), a
// closing bridge (fleet.ErrClosing) and an engine out of reach by their
// codes; anything else is sandbox_unavailable.
func WireError(err error) wire.Error {
	var werr wire.Error
	switch {
	case errors.As(err, &werr):
		return werr
	case errors.Is(err, fleet.ErrLimit):
		return wire.Error{Code: wire.CodeSandboxLimit, Message: err.Error()}
	case errors.Is(err, fleet.ErrClosing):
		return wire.Error{Code: wire.CodeInternal, Message: err.Error()}
	case errors.Is(err, sandbox.ErrEngineUnavailable):
		return wire.Error{Code: wire.CodeEngineUnavailable, Message: "the bridge cannot reach the container engine: " + err.Error()}
	default:
		return wire.Error{Code: wire.CodeSandboxUnavailable, Message: "could not start a sandbox: " + err.Error()}
	}
}
