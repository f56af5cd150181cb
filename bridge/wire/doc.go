// Package wire is the boxwire protocol: the envelope, the message types, their
// payloads and the protocol version. Clients, the bridge and the agent all
// speak it, over WebSocket text frames holding one JSON envelope each; see
// docs/protocol.md for the reference.
//
// The package imports only the standard library, so every component can
// depend on it and on nothing else of ours.
package wire
