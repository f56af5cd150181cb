package threadlog

import (
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Bounds of a thread's in-memory tail: the newest committed events, kept so
// that live clients and short resumes never touch the store. Older events
// are read from the store.
const (
	maxTailEvents = 4096
	maxTailBytes  = 4 << 20
)

// DefaultMaxStoredOutput caps the tool_output bytes of one call kept in the
// store (server.Config.MaxStoredOutput).
const DefaultMaxStoredOutput = 256 << 10

// Log is a thread's numbering and its in-memory tail, and whether its
// agent is working as the committed events show. It is not safe for
// concurrent use: the thread's mutex guards it. Events are numbered
// (Number) when published and enter the tail when the store has
// committed them (Add).
type Log struct {
	next      uint64 // seq of the newest published event
	committed uint64 // seq of the newest event in the tail (and the store)
	tail      []wire.Envelope
	tailBytes int
	outBytes  map[string]int // stored tool_output bytes per call id
	maxOutput int
	work      workState // whether the agent is working (work.go)
}

// New returns the log of a thread whose newest stored event has seq last;
// maxOutput caps the stored tool_output bytes of one call (ForStore).
func New(last uint64, maxOutput int) Log {
	return Log{next: last, committed: last, outBytes: map[string]int{}, maxOutput: maxOutput}
}

// Number gives env the next seq and returns it.
func (l *Log) Number(env wire.Envelope) wire.Envelope {
	l.next++
	env.Seq = l.next
	return env
}

// Committed is the seq of the newest event in the tail (and the store):
// the newest a client may be sent.
func (l *Log) Committed() uint64 { return l.committed }

// Resumed takes the agent's account of its work from its resumed answer r
// (see workState.resumed).
func (l *Log) Resumed(r wire.Resumed) { l.work.resumed(r, l.committed, l.next) }

// Busy reports whether the agent runs a turn or a tool call.
func (l *Log) Busy() bool { return l.work.busy() }

// Add puts a committed event into the tail, dropping the oldest past the
// bounds.
func (l *Log) Add(env wire.Envelope) {
	l.committed = env.Seq
	l.work.track(env)
	l.tail = append(l.tail, env)
	l.tailBytes += len(env.Data)
	drop := 0
	for len(l.tail)-drop > 1 && (len(l.tail)-drop > maxTailEvents || l.tailBytes > maxTailBytes) {
		l.tailBytes -= len(l.tail[drop].Data)
		drop++
	}
	if drop > 0 {
		l.tail = append([]wire.Envelope(nil), l.tail[drop:]...)
	}
}

// FromTail returns up to limit tail events with seq > after; ok is false
// when events after `after` are older than the tail (read the store).
func (l *Log) FromTail(after uint64, limit int) (evs []wire.Envelope, ok bool) {
	if after >= l.committed {
		return nil, true
	}
	if len(l.tail) == 0 || l.tail[0].Seq > after+1 {
		return nil, false
	}
	i := int(after + 1 - l.tail[0].Seq)
	end := min(len(l.tail), i+limit)
	return append([]wire.Envelope(nil), l.tail[i:end]...), true
}

// Head returns up to limit of the oldest tail events.
func (l *Log) Head(limit int) []wire.Envelope {
	return append([]wire.Envelope(nil), l.tail[:min(len(l.tail), limit)]...)
}

// ForStore is env as the store keeps it: a tool_output chunk past the
// call's MaxStoredOutput keeps its seq, but its output becomes a marker
// (the first time) or empty; the whole output stays in the sandbox's
// output file, named by the call's tool_result.
func (l *Log) ForStore(env wire.Envelope) wire.Envelope {
	if env.Type != wire.TypeToolOutput {
		return env
	}
	var out wire.ToolOutput
	if env.Decode(&out) != nil {
		return env
	}
	used := l.outBytes[out.CallID]
	l.outBytes[out.CallID] = used + len(out.Output)
	if used+len(out.Output) <= l.maxOutput {
		return env
	}
	text := ""
	if used <= l.maxOutput {
		text = fmt.Sprintf("\n[boxwire: output past %d bytes is not kept in the thread log; the tool_result names the file with all of it]\n", l.maxOutput)
	}
	capped := wire.MustNew(env.Type, env.Thread, env.ID, wire.ToolOutput{CallID: out.CallID, Output: text})
	capped.Seq = env.Seq
	return capped
}

// Forget drops the per-call output counter of a finished call.
func (l *Log) Forget(env wire.Envelope) {
	if env.Type != wire.TypeToolResult {
		return
	}
	var r wire.ToolResult
	if env.Decode(&r) == nil {
		delete(l.outBytes, r.CallID)
	}
}
