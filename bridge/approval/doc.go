// Package approval runs a thread's approval policy (docs/approvals.md) on
// the bridge: the decisions of bridge/policy carried out over the wire.
//
// Each thread has a [Gate]: its policy (the bridge's, or the thread's own
// rules in front of it, [ThreadPolicy]), the approval requests waiting for
// one of its clients, and the streamed tool output kept back for
// redaction. The server makes one per thread with [NewGate], naming how
// the gate publishes an event on its thread, and calls it:
//
//   - [Gate.CheckTool] for an agent's tool_check (it blocks while a
//     client is asked; the server runs it on a goroutine of the thread);
//     the same check asked again on a new agent connection joins its
//     approval;
//   - [Gate.Restore] when a bridge starts relaying the thread: the
//     undecided approvals in the store are pending again (durable.go);
//   - [Gate.Answer] for a client's approve, deny, or a tool_check or
//     tool_verdict it may not send;
//   - [Gate.Stream] on every event before it is logged or sent (stage 2
//     of the event path, bridge/server events.go): secrets out, and a
//     tool_output tail that may start a secret kept back until the next
//     chunk or the result;
//   - [Gate.HeldSnapshot] and [Gate.RestoreHeld] to keep the held tails
//     with the agent cursor across a restart.
//
// [CheckEgress] decides a sandbox's egress request (the fleet's
// Config.Check), asking the clients of every thread of the sandbox at
// once when the policy says ask; [Decide] is the allow, deny or ask step
// both share. Every decision is published on the threads it concerns as
// an approval_decision, the audit record.
//
// A gate made with a [Config] keeps its approvals in the store
// (store.Approvals), where the first decision of any bridge wins and the
// bridge that relays the thread next finds them (docs/approvals.md,
// "Across bridges").
//
// It imports policy, egress, store and wire; never the server. Everything
// is safe for concurrent use.
package approval
