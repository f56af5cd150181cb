// Package threadops carries out the threads API's calls that describe a
// thread or change its sandbox, over the server's live threads, the fleet
// and the store:
//
//   - describing: Info (a live thread: its sandbox's status, asking the
//     engine whether it runs), List (every live and suspended thread the
//     caller may see, oldest first), Get, Known, Suspended;
//   - changing a thread's sandbox (PATCH /v1/threads/{id}): SetEgress (its
//     egress rules, docs/egress-thread.md "Changing the rules") and
//     MoveImage (another allowed image, docs/lifecycle.md "Rollouts").
//
// Creating and deleting a thread stay the server's, which owns the
// threads; it hands this package its live threads (Threads, each a
// Thread) and serves the HTTP routes with bridge/threadapi. An [*Ops] is
// safe for concurrent use; its calls block on the store, the fleet's
// per-thread and per-box locks and (Info) the engine, and end with their
// ctx or, for changes, when Config.Server ends. It starts no goroutines.
// It never imports the server.
package threadops
