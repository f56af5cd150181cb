package server

import "github.com/boxwire/boxwire/bridge/wire"

// maxLogEvents bounds a thread's in-memory event log; the oldest tenth is
// dropped when it is full.
const maxLogEvents = 10000

// eventLog is a thread's numbered events, oldest first. It is not safe for
// concurrent use; the thread's mutex guards it.
type eventLog struct {
	events []wire.Envelope
	last   uint64 // seq of the newest event, 0 when none
}

// append numbers env with the next seq, keeps it and returns it.
func (l *eventLog) append(env wire.Envelope) wire.Envelope {
	l.last++
	env.Seq = l.last
	if len(l.events) >= maxLogEvents {
		// Drop a tenth at once so appending stays cheap.
		l.events = append([]wire.Envelope(nil), l.events[maxLogEvents/10:]...)
	}
	l.events = append(l.events, env)
	return env
}

// after returns a copy of the kept events with seq > seq.
func (l *eventLog) after(seq uint64) []wire.Envelope {
	i := len(l.events)
	for i > 0 && l.events[i-1].Seq > seq {
		i--
	}
	return append([]wire.Envelope(nil), l.events[i:]...)
}
