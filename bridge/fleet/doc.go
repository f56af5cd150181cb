// Package fleet owns the bridge's sandboxes: it creates them, keeps the
// warm pool, suspends idle ones and resumes them, recycles them at their
// maximum lifetime or when their image is rebuilt, reaps what expired,
// adopts what an earlier run left (Reconcile) and removes everything of a
// bridge id (Collect, `bridge gc`). It depends on the [sandbox.Manager]
// interface only — plus bridge/boxdir for each sandbox's two host folders
// and bridge/llmproxy and bridge/egress for the proxies served in them — so
// a second engine implements that interface and nothing above changes. It
// does not know the bridge's server; the server knows it.
//
// Its parts with narrow APIs of their own live in sub-packages, none of
// which knows the fleet: boxproxy serves each sandbox's LLM and egress
// proxies, greet greets and claims its agent (posture checked), records
// asks and updates the stored threads, and pace decides which idle
// sandboxes move to a rebuilt image when. The fleet keeps the boxes, their
// lock and everything that changes a box.
//
// # The API the server uses
//
// A sandbox is a [Box]. Threads are its members ([Member], implemented by
// the server's thread): one in thread scope, any number in assistant scope.
//
//   - [Fleet.Options] validates a thread's request (scope, image, runtime,
//     idle TTL, egress rules) and [Fleet.ResumeOptions] rebuilds them from a
//     stored [ThreadRecord].
//   - [Fleet.Acquire] returns a box for a new thread with its agent greeted
//     and claimed (the LLM token handed over) on the returned connection: a
//     warm pooled sandbox, an assistant's shared one, or a new one. It
//     blocks while the sandbox is made. The caller then registers the thread
//     with [Fleet.Attach], and calls [Fleet.Started] once its start is over
//     either way (the reaper leaves the box alone meanwhile) and
//     [Fleet.Abandon] when the thread did not start.
//   - [Fleet.Release] takes a thread out of its box; when it owned the box
//     alone the caller removes the box with [Fleet.Remove].
//   - A member learns of its sandbox's exits and replacements through its
//     agent connection and asks the fleet: [Fleet.LossCause] says why the
//     fleet ended the sandbox (maximum lifetime, image update, another
//     member's replacement, a shared sandbox that stopped);
//     [Fleet.Replace] gives it the next sandbox, made once for all members
//     of a shared box, greeted; [Fleet.Greet] greets the agent of the
//     current one again; [Fleet.Linked] records which sandbox a member's
//     link talks to. The fleet calls [Member.Suspend] when it suspends a
//     box for idleness and [Member.Publish] with the events of its proxies
//     (usage, egress decisions, LLM refusals): that is the subscription.
//   - [Fleet.SetEgress] replaces a box's own egress rules; [Fleet.Members]
//     lists a box's members (egress approvals ask their clients).
//   - [Fleet.Locks] are the per-thread and per-box lifecycle locks the
//     fleet takes itself while it suspends, resumes, adopts or removes;
//     lock a thread before a box.
//   - [Fleet.Stop] stops the reaper and the pool and removes the pooled
//     sandboxes; [Fleet.Close] then closes every box's proxies. Sandboxes,
//     volumes and folders stay for the next start's [Fleet.Reconcile].
//
// # Goroutines and locks
//
// New starts the reaper (every ReapInterval: recycle, suspend, expire,
// image updates, thread retention) and, with Config.Pool set, the pool's
// filler; Stop stops and waits for both. Everything else runs on its
// caller's goroutine. The Fleet's mutex guards its boxes, the pool's books
// and every Box field that changes; it is never held while calling a
// Member, except Working and Attached, which must not call back into the
// Fleet. A caller may hold its own lock around Attach and Release (the
// server does: its lock, then the fleet's, then a member's).
//
// A Fleet is safe for concurrent use.
package fleet
