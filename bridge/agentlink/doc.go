// Package agentlink is the bridge's side of one thread's agent: the
// WebSocket connection to the agent in the thread's sandbox, and the next
// one when it drops. A thread has one [Link] for its life; the link has one
// agent connection at a time, served by a reader (agent messages into the
// thread) and a writer (requests, terminal input, stream traffic and pings
// to the agent; [Link.Send], [Link.SendInput] queue for it).
//
// # What a link does
//
//   - Resume (docs/resume.md): every connection first asks the agent to
//     resume after the thread's agent cursor; the agent answers resumed and
//     replays what followed. Agent events before resumed and at or below the
//     cursor are dropped, a gap is published as events_lost, and the cursor
//     is stored in the same transaction as the events it covers
//     ([Thread.PublishCovered], resume.go).
//   - Requests in flight: the requests that start work (user_message,
//     run_tool) are kept from the moment they are written until the agent
//     answers them, in memory and in the store, and sent again after a
//     replacement, a reconnect or a bridge restart (inflight.go).
//   - Every turn ends (docs/lifecycle.md): the link follows, from the
//     events the thread numbers ([Link.Track]), which turn and calls the
//     log shows running, and ends what no agent runs any more (turnend.go).
//   - A lost connection (lost.go): the fleet says why when it ended the
//     sandbox itself ([Fleet.LossCause]); else the engine is asked. A
//     sandbox that still runs is greeted again ([Fleet.Greet]); one that
//     stopped is replaced on the same volume ([Fleet.Replace]) and the new
//     agent gets the thread's history ([SendHistory]).
//
// Everything it publishes goes through [Thread.Publish], the thread's
// event path from redaction on; the agent's replies, tool checks and
// terminal messages go to [Thread.Deliver].
//
// # Goroutines and locks
//
// [Link.Start] starts the first connection's reader and writer; a reader
// whose connection ends starts the next pair (reconnect or replace) before
// it returns, and resends on a goroutine of its own. The reader is a
// goroutine for the connection's life; the writer runs on a goroutine only
// while something waits for it (wire.Pump, write.go): a queued request,
// input or stream item, a ping, the connection's or the thread's end. All
// of them are counted in Config.Group (the writer from its start until it
// finished), which the thread waits for once its context is cancelled;
// call [Link.Stop] first, so a lost connection is not reported or
// replaced. The link's mutex guards the current connection, the cursor
// and the open work; it is taken inside the thread's (Track), never held
// while calling the Thread.
package agentlink
