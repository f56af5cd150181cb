package session

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The backlog: every thread keeps its newest events, numbered by the
// thread's seq, whether or not a connection is attached. A bridge that
// (re)connects sends resume with the agent instance and the last agent seq
// it stored; the agent answers resumed and replays the backlog after that
// seq, in order before later events, and says what it no longer holds with
// events_lost. So events made while no bridge was attached — or queued on
// a link that died — are not lost (docs/resume.md).

// Bounds of one thread's backlog: the newest events up to both limits are
// kept (at least the newest one).
const (
	maxBacklogEvents = 65536
	maxBacklogBytes  = 8 << 20
	// backlogOverhead is counted per event besides its payload, ID and
	// thread name: the envelope's fields and JSON.
	backlogOverhead = 64
)

// newInstance returns a random id for this agent process.
func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// backlog holds a thread's newest events, oldest first, with contiguous
// seqs. The thread's mutex guards it.
type backlog struct {
	evs   []wire.Envelope
	bytes int
}

func eventSize(env wire.Envelope) int {
	return len(env.Data) + len(env.ID) + len(env.Thread) + backlogOverhead
}

// add appends a numbered event and drops the oldest past the bounds.
func (b *backlog) add(env wire.Envelope) {
	b.evs = append(b.evs, env)
	b.bytes += eventSize(env)
	drop := 0
	for len(b.evs)-drop > 1 && (len(b.evs)-drop > maxBacklogEvents || b.bytes > maxBacklogBytes) {
		b.bytes -= eventSize(b.evs[drop])
		b.evs[drop] = wire.Envelope{} // let the payload go
		drop++
	}
	if drop > 0 {
		b.evs = b.evs[drop:]
	}
}

// replay returns what a bridge whose log ends at agent seq after must be
// sent, given that the thread's newest seq is last: an events_lost event
// (nil when nothing is missing) and a copy of the backlog's events after
// after. A cursor beyond last (another numbering) replays everything held.
func (b *backlog) replay(thread, instance string, after, last uint64) (*wire.Envelope, []wire.Envelope) {
	if after > last {
		after = 0
	}
	oldest := last + 1 // the first seq the backlog holds
	if len(b.evs) > 0 {
		oldest = b.evs[0].Seq
	}
	var lost *wire.Envelope
	if oldest > after+1 {
		n := oldest - 1 - after
		env := wire.MustNew(wire.TypeEventsLost, thread, "", wire.EventsLost{
			Instance: instance, From: after + 1, To: oldest - 1, Count: n,
			Message: fmt.Sprintf("%d events the agent made while no bridge held them are no longer in its backlog (it keeps %d events, %d MiB)",
				n, maxBacklogEvents, maxBacklogBytes>>20),
		})
		env.Seq = oldest - 1
		lost = &env
		after = oldest - 1
	}
	i := 0
	if len(b.evs) > 0 && after >= oldest {
		i = int(after - oldest + 1)
	}
	i = min(i, len(b.evs))
	return lost, append([]wire.Envelope(nil), b.evs[i:]...)
}

// resume answers a bridge's resume request: resumed, then the replay, in
// the event queue and under the thread's lock, so every later event
// follows them. It may block while the bridge's queue is full. Only a
// bridge may ask (not_allowed otherwise).
func (t *thread) resume(c *conn, env wire.Envelope) {
	if c.role != wire.RoleBridge {
		c.reply(wire.ErrorEnvelope(t.name, env.ID, wire.CodeNotAllowed, "resume is sent only by a bridge"))
		return
	}
	var r wire.Resume
	if err := env.Decode(&r); err != nil {
		c.reply(wire.ErrorEnvelope(t.name, env.ID, wire.CodeBadMessage, "%s", err.Error()))
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.enqueue(t.replayLocked(r, env.ID)) {
		c.resumed = true // tool checks may go to c now: they follow the replay (approval.go)
		t.hadBridge = true
		if t.resumeWake != nil {
			close(t.resumeWake)
			t.resumeWake = nil
		}
	}
}

// replayLocked is the answer to resume r: resumed, then events_lost when
// the backlog does not reach back to the resume point, then the backlog
// after it. A resume naming another instance, or a seq this instance has
// not reached, starts from 0. The caller holds t.mu.
func (t *thread) replayLocked(r wire.Resume, id string) outgoing {
	var after uint64
	if r.Instance == t.s.instance && r.After <= t.seq {
		after = r.After
	}
	lost, evs := t.backlog.replay(t.name, t.s.instance, after, t.seq)
	batch := make([]wire.Envelope, 0, len(evs)+1)
	if lost != nil {
		batch = append(batch, *lost)
		t.log.Warn("bridge resumed past the backlog", "after", after, "lost", string(lost.Data))
	}
	batch = append(batch, evs...)
	res := wire.Resumed{Instance: t.s.instance, After: after, Replayed: len(evs)}
	t.workLocked(&res) // what runs, as of the replay's end
	t.log.Info("bridge resumed", "after", after, "replayed", len(evs), "busy", res.Busy)
	return outgoing{env: wire.MustNew(wire.TypeResumed, t.name, id, res), batch: batch}
}

// trackCallLocked follows the thread's running tool calls (the turn's and
// run_tool's) from the events it emits, as the bridge does from its log:
// a tool_call starts one, its tool_result ends it. The caller holds t.mu.
func (t *thread) trackCallLocked(env wire.Envelope) {
	if env.Type != wire.TypeToolCall && env.Type != wire.TypeToolResult {
		return
	}
	var call struct {
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(env.Data, &call) != nil || call.CallID == "" {
		return
	}
	if env.Type == wire.TypeToolResult {
		delete(t.calls, call.CallID)
		return
	}
	if t.calls == nil {
		t.calls = map[string]bool{}
	}
	t.calls[call.CallID] = true
}

// workLocked fills r's account of the thread's work as of its newest
// event. The caller holds t.mu.
func (t *thread) workLocked(r *wire.Resumed) {
	r.Seq = t.seq
	r.Turn = t.cancel != nil
	for id := range t.calls {
		r.Calls = append(r.Calls, id)
	}
	slices.Sort(r.Calls)
	r.Busy = r.Turn || len(r.Calls) > 0
}
