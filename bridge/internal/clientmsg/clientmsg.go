// Package clientmsg says which messages a client may send its thread
// through the bridge: a request goes on to the agent; the messages that
// are between the agent and the bridge (history, claim, resume, host
// tools), a second hello, an event or answer (not a request) and an
// unknown type are refused with the error the client is sent. The server
// takes approvals and terminal messages aside before it asks (its
// thread.request). It imports only wire and holds no state.
package clientmsg

import "github.com/boxwire/boxwire/bridge/wire"

// Refusal is the error a client that sent env on thread is answered with,
// and true, when env is not a request the bridge passes on to the agent;
// else false.
func Refusal(thread string, env wire.Envelope) (wire.Envelope, bool) {
	switch {
	case env.Type == wire.TypeHistory: // the bridge's alone (agentlink.SendHistory)
		return wire.ErrorEnvelope(thread, env.ID, wire.CodeNotAllowed, "history is sent only by the bridge"), true
	case env.Type == wire.TypeClaim || env.Type == wire.TypeClaimed, // the warm pool's (bridge/fleet)
		env.Type == wire.TypeResume || env.Type == wire.TypeResumed, // bridge/agentlink
		wire.IsHostTool(env.Type):                                   // the server's hosttools.go
		return wire.ErrorEnvelope(thread, env.ID, wire.CodeNotAllowed, "%s is between the agent and the bridge", env.Type), true
	case wire.IsRequest(env.Type):
		return wire.Envelope{}, false
	case env.Type == wire.TypeHello:
		return wire.ErrorEnvelope(thread, env.ID, wire.CodeBadMessage, "hello was already exchanged"), true
	case !wire.Known(env.Type):
		return wire.ErrorEnvelope(thread, env.ID, wire.CodeUnknownType, "unknown message type %q", env.Type), true
	default:
		return wire.ErrorEnvelope(thread, env.ID, wire.CodeBadMessage, "%s is not a request", env.Type), true
	}
}
