// Package forward is the agent's side of port streams (docs/protocol.md,
// "Ports and streams"): on its bridge's port_open it dials a TCP port on
// the sandbox's own loopback — 127.0.0.1, then ::1, never another address
// — and carries the connection's bytes as stream frames on the connection
// the request came on, with a credit window per stream and direction
// (wire.Inbox, wire.Credit). Nothing listens on a new socket and the
// sandbox gains no network: the bytes travel on the agent's one
// WebSocket.
//
// A [Mux] serves one connection's streams. Its Handle and Frame are
// called by the connection's reader and never block: data is appended to
// the stream's inbox, at most one window of it. Each open stream has two
// goroutines, owned by the Mux: one writes the inbox to the TCP
// connection and returns credit, one reads the TCP connection within the
// credit it has and queues data frames on the connection's queue (the
// Out). A stream that carries nothing either way for Config.Idle is
// closed. [Mux.Close] ends every stream and waits for its goroutines.
//
// [Listening] asks the kernel what listens on the sandbox's loopback over
// sock_diag (a dump of the listening TCP sockets only), or reads
// /proc/net/tcp and /proc/net/tcp6 where the kernel or the sandbox
// runtime does not answer (gVisor), leaving out the agent's own sockets;
// [Watch] reports it whenever it changes: the ports event.
package forward
