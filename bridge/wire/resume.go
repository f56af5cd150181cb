package wire

// Agent resume: how a bridge that (re)connects to a running agent gets every
// event the agent made while no bridge held them, exactly once. The agent
// keeps a bounded backlog of its newest events per thread and names its
// process in its hello answer (Hello.Instance). When a bridge starts using
// a connection it sends TypeResume with the agent instance and the last
// agent seq its log holds; the agent answers TypeResumed, then the backlog
// after that seq (TypeEventsLost first for what it no longer holds), then
// live events. The bridge drops agent events that reach it before
// TypeResumed: the replay carries them again. See docs/resume.md.

const (
	// TypeResume is a bridge's request to an agent (payload Resume): replay
	// the thread's events after Resume.After. Only a bridge sends it; the
	// bridge answers a client's with not_allowed.
	TypeResume Type = "resume"
	// TypeResumed answers TypeResume (payload Resumed) with the request's
	// ID. It travels in order with the events: the replay follows it.
	TypeResumed Type = "resumed"
	// TypeEventsLost is the event that says events were lost: the agent's
	// backlog no longer reached back to the bridge's cursor, or the bridge
	// saw a gap in the agent's numbering (payload EventsLost). From an
	// agent its Seq is the agent seq of the last lost event.
	TypeEventsLost Type = "events_lost"
	// TypeAccepted is an agent's reply (no payload) to a user_message or
	// run_tool from a bridge whose id it has already accepted — a request
	// the bridge sent again after a restart or a reconnect because it did
	// not know it had been answered: the agent does not run it twice. The
	// bridge takes it as the answer and does not forward it.
	TypeAccepted Type = "accepted"
)

func init() {
	registerRequests(TypeResume, TypeResumed, TypeAccepted)
	registerEvents(TypeEventsLost)
}

// Resume is the payload of TypeResume: where the bridge's log of the
// agent's events ends — the agent instance it last heard and the newest
// agent seq of that instance it has. An agent whose instance is different
// (or whose numbering has not reached After) replays from its first event.
type Resume struct {
	Instance string `json:"instance,omitempty"`
	After    uint64 `json:"after"`
}

// Resumed is the payload of TypeResumed.
type Resumed struct {
	// Instance is the agent process's random id (as in its hello answer).
	Instance string `json:"instance"`
	// After is the agent seq the replay follows: Resume.After when the
	// instance matched, else 0.
	After uint64 `json:"after"`
	// Replayed counts the backlog events that follow (after any
	// events_lost), before live events.
	Replayed int `json:"replayed"`
	// Seq is the agent's newest seq when it answered: the replay ends with
	// the event of this seq (0: the agent has made no event). Turn and
	// Calls describe the agent's work as of that event.
	Seq uint64 `json:"seq,omitempty"`
	// Busy is set when the agent was working: a turn running (Turn) or
	// tool calls running (Calls, their call ids; run_tool's included).
	// The bridge's work tracking (a recycle waits for a safe point)
	// starts from it.
	Busy  bool     `json:"busy,omitempty"`
	Turn  bool     `json:"turn,omitempty"`
	Calls []string `json:"calls,omitempty"`
}

// EventsLost is the payload of TypeEventsLost. From and To are agent seqs
// (inclusive) of the agent instance Instance.
type EventsLost struct {
	Instance string `json:"instance,omitempty"`
	From     uint64 `json:"from"`
	To       uint64 `json:"to"`
	Count    uint64 `json:"count"`
	Message  string `json:"message"`
}
