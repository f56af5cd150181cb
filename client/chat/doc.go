// Package chat is the Go client for the boxwire wire protocol
// (docs/protocol.md): Dial a bridge or a standalone agent, send requests,
// read events, and run turns. The CLI, the end-to-end tests and the
// benchmarks use it.
//
// A Conn owns exactly two goroutines: a reader, which delivers events on
// Events and hands each reply to the Request (or Ping) waiting for its
// id, and a writer, which is the only goroutine that
// writes to the socket and also sends WebSocket keep-alive pings. Close
// stops both and waits for them.
//
// Events are delivered through a buffered channel. A consumer that falls
// more than Config.EventBuffer events behind is not waited for: the
// connection ends with ErrSlowConsumer, and LastSeq tells where to resume
// (Dial again with AfterSeq set to it).
package chat
