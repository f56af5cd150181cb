// Package session serves the boxwire wire protocol (docs/protocol.md) over
// WebSocket for the agent: it authenticates and upgrades connections,
// binds each to a thread, routes requests (user_message, interrupt, ping)
// and fans a thread's numbered events out to every connection attached to
// it.
//
// A turn belongs to its thread, not to the connection that started it: it
// keeps running when that connection drops, and every connection on the
// thread sees its events. Each connection has exactly one reader and one
// writer goroutine; a connection that cannot keep up with its thread's
// events is dropped rather than waited for.
package session
