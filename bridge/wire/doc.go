// Package wire is the boxwire protocol: the envelope, the message types, their
// payloads and the protocol version. Clients, the bridge and the agent all
// speak it, over WebSocket text frames holding one JSON envelope each; see
// docs/protocol.md for the reference.
//
// The package imports only the standard library, so every component can
// depend on it and on nothing else of ours.
//
// # Flow control
//
// Besides the messages, wire holds the one way every component moves them:
// a connection's terminal queue within the protocol's byte budget
// (TerminalBudget), fan-out of one frame to several queues, and a writer
// with a deadline per frame.
//
// A Queue holds one connection's terminal traffic in order: control
// messages (Send) and output frames (Offer), bounded in items and, for
// frames, in bytes. Neither call blocks: Send reports false when the queue
// has no room for an item (the connection is too slow and its owner drops
// it), Offer reports false when the frame would pass the byte budget (the
// producer may wait for room, see Fanout). The queue's one consumer, the
// connection's writer, takes them with TryNext — waiting on Ready, or
// kicked by OnPush — and hands every item it took back with Release;
// Release is what wakes producers waiting for room. A Queue is never
// closed: it is garbage once its connection is.
//
// A Pump runs a connection's writer on a goroutine only while there is
// something to write: producers Kick it (a Queue's OnPush, a wake-up, a
// close, its own tick for pings), it runs the writer until that finds
// nothing, and a Kick that meets a writer on its way out makes it run
// again, so nothing is left unsent and never two writers run at once.
//
// Fanout offers one frame to every Target. While some are full it waits
// until one of them has room (its Watchers wake the fan-out's Waker), the
// done channel closes, or the waiting rule gives up: a target still full
// LagGrace after another took the frame, or StallLimit after the first
// offer, is returned as too slow for the caller to detach. Deliver blocks
// for at most the longer of StallLimit and LagGrace; it returns at once
// when every target takes the frame, and it allocates nothing then.
//
// Writer writes frames to a WebSocket connection (the subset of
// github.com/gorilla/websocket's *Conn in Conn) with a write deadline per
// frame; it is not safe for concurrent use — a connection has exactly one
// writer, its pump (a goroutine of its own, or a Pump's), which owns the
// Writer.
package wire
