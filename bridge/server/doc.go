// Package server is the bridge's HTTP and WebSocket API.
//
// A client connects to GET /v1/ws with the bridge's bearer token and sends
// hello. An empty thread creates one: a private socket folder, an LLM proxy
// on <folder>/llm.sock that holds the real key, and a sandbox (through a
// [sandbox.Manager]) whose agent listens on <folder>/agent.sock. The server
// answers the client's hello only once that agent has answered the bridge's.
//
// Each thread has one agent connection, served by one reading and one
// writing goroutine. Requests from clients travel to the agent with their id
// rewritten to "<connID>/<id>", so the agent's replies (no seq) go back to
// the one client that asked; the agent's events are renumbered with the
// thread's own seq, kept in the thread's bounded event log, and fanned out to
// every attached client. A client that resumes with after_seq first gets the
// logged events after it, then live ones, without gap or duplicate.
//
// Each client connection has one reader and one writer goroutine; the writer
// is fed by a buffered channel and sends pings. A client that cannot keep up
// is dropped with close code 1013 (try again later), never waited for.
//
// DELETE /v1/threads/{id} removes a thread with its sandbox, workspace
// volume, proxy and folder. [Server.Close] removes everything the server
// created.
package server
