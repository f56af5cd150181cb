// Package server is the bridge's HTTP and WebSocket API.
//
// A client connects to GET /v1/ws with the bridge's bearer token and sends
// hello. An empty thread creates one: a private socket folder, an LLM proxy
// on <folder>/llm.sock that holds the real key, and a sandbox (through a
// [sandbox.Manager]) whose agent listens on <folder>/agent.sock. The server
// answers the client's hello only once that agent has answered the bridge's.
//
// Each thread has one agent connection at a time, served by its agent
// link (bridge/agentlink, which also resumes, resends and replaces): a
// reading goroutine, and a writer that has a goroutine only while it
// writes; its numbering and in-memory tail are a threadlog.Log
// (bridge/threadlog).
//
// Requests from clients travel to the agent with their id rewritten to
// "<connID>/<id>", so the agent's replies (no seq) go back to the one
// client that asked; the agent's events are renumbered with the
// thread's own seq, kept in the thread's bounded event log, and fanned out to
// every attached client. A client that resumes with after_seq first gets the
// logged events after it, then live ones, without gap or duplicate.
//
// Each client connection has one reader goroutine (relay, started once
// the client is attached) and one writer, which runs on a goroutine only
// while it has something to write (wire.Pump): events by cursor, the
// replies and terminal items of its queues, pings, the close. A client
// that cannot keep up is dropped with close code 1013 (try again later),
// never waited for.
//
// Sandboxes ("boxes") are made per thread, or shared by every thread of an
// assistant (scope assistant), by the server's fleet (bridge/fleet): it
// creates, pools, suspends, recycles, reaps and adopts them, and a thread is
// a fleet.Member of its box. The threads API (POST, GET /v1/threads, GET,
// PATCH and DELETE /v1/threads/{id}) creates, lists, changes and removes
// threads, within an image and runtime allowlist and MaxSandboxes. A dead
// container becomes a sandbox_exited event on its threads; events pass the
// stages in events.go (resume and dedupe, redaction, log append, fan-out).
//
// [Server.Close] closes connections and proxies but leaves sandboxes,
// volumes and socket folders; [Server.Reconcile] adopts them at the next
// start (by label, see sandbox.LabelOwner and friends); [Collect] removes
// everything of a bridge id (bridge gc). Thread records go through a
// [ThreadStore] so a persistent store can replace the in-memory one.
//
// What is not the threads' own lives in packages the server mounts or
// calls: who may do what (bridge/users: route guards, ownership, quotas,
// audit), approvals and redaction (bridge/approval: a Gate per thread),
// the rollout API (bridge/rollout), the Host check (bridge/hostcheck),
// file transfers (bridge/files), browser sessions and the page
// (bridge/web), thread records over the store (bridge/recordstore),
// describing threads and changing their sandboxes for the threads API
// (bridge/threadops), GET /metrics (bridge/metrics), the settings and
// their defaults (bridge/config), forwarding a client to another bridge
// (bridge/internal/wsrelay), opening the store and forgetting a bridge's
// threads in it (bridge/storeopen).
// docs/architecture.md is the map.
package server
