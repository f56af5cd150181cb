package chat

import "github.com/boxwire/boxwire/bridge/wire"

// Receiver takes a connection's traffic before Events does
// (Config.Receiver): client/term uses it for terminal output, which
// arrives in binary frames, and for the replies to its requests.
//
// Its methods are called on the connection's reader goroutine, one at a
// time, in the order the frames arrived. They must not block for long
// (they pace the reader, and so the server's output) and must not wait
// for anything only the same connection's reader can bring (a reply, a
// pong). A panic in them ends the connection (Err says so) instead of the
// process. Data passed to Binary is only valid during the call.
type Receiver interface {
	// Binary is called with each binary frame, whole (wire.ParseFrame
	// reads it).
	Binary(data []byte)
	// Message is called with each JSON message but pong (events, errors,
	// replies); it reports whether it consumed env, which then does not
	// go on to Events.
	Message(env wire.Envelope) (consumed bool)
}
