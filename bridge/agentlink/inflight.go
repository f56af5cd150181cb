package agentlink

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/boxwire/boxwire/bridge/wire"
)

// inflight keeps the requests that start work in the agent (user_message,
// run_tool) from the moment the agent writer writes them until the
// agent answers them (the turn's user_echo, run_tool's tool_call, a busy
// error, accepted). A sandbox that dies or is recycled in between —
// the request written to a socket nobody reads any more — would lose them
// silently; replace hands them to the new agent instead. (Requests still
// queued for the writer go to the new agent anyway.) The old agent's first
// answer (answersRequest) acknowledges a request, so a request is never
// run twice in the log's view.
//
// The list is also kept in the store (save; docs/resume.md, "Requests in
// flight"), queued behind the events, so a bridge killed in between finds
// it again when it adopts the thread; after every agent link's replay
// (resumed, then the backlog) the requests written on an earlier link and
// still unanswered are sent again (resendStale). The agent answers one it
// had accepted with accepted rather than running it twice. It is safe for
// concurrent use.
type inflight struct {
	mu   sync.Mutex
	reqs []sentReq // in the order they were handed over
	// save, when set, queues the list in the store; it is called with mu
	// held, so lists are queued in the order they were made.
	save func([]wire.Envelope)
}

// sentReq is one tracked request and the agent link it was written on
// (connection.n; 0: restored from the store).
type sentReq struct {
	env  wire.Envelope
	link uint64
}

// Request ids. A work request's routed id names its client connection and
// a tag unique to this bridge process and request ("c3~5e1f.12/m7"), so
// the agent, which remembers the ids it accepted, never takes a new
// request for one it ran before another bridge process restarted the
// connection numbering.
var (
	runTag = newRunTag()
	reqTag atomic.Uint64
)

func newRunTag() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// RoutedID is the id a client's request is sent to the agent with: the
// client connection's id connID, a "/" and the client's own id.
func RoutedID(connID, id string, typ wire.Type) string {
	if startsWork(typ) {
		connID += "~" + runTag + "." + strconv.FormatUint(reqTag.Add(1), 10)
	}
	return connID + "/" + id
}

// connOf is the client connection id in the first part of a routed id;
// "" for a request an earlier bridge process routed (sent again after a
// restart): its client is gone, and a connection of this process may have
// the same id.
func connOf(part string) string {
	c, tag, tagged := strings.Cut(part, "~")
	if tagged && !strings.HasPrefix(tag, runTag+".") {
		return ""
	}
	return c
}

// startsWork reports whether a request of type typ is tracked.
func startsWork(typ wire.Type) bool {
	return typ == wire.TypeUserMessage || typ == wire.TypeRunTool
}

// answersRequest reports whether env can be the agent's first answer to a
// tracked request: a reply (no seq), the turn's user_echo or run_tool's
// tool_call. Only these acknowledge, so a flood of tool_output does not
// pass through the lock.
func answersRequest(env wire.Envelope) bool {
	return env.Seq == 0 || env.Type == wire.TypeUserEcho || env.Type == wire.TypeToolCall
}

// add tracks env (its routed id) as written on link; a request tracked
// already (sent again) moves to link.
func (f *inflight) add(env wire.Envelope, link uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.reqs {
		if f.reqs[i].env.ID == env.ID {
			f.reqs[i].link = link
			return
		}
	}
	f.reqs = append(f.reqs, sentReq{env: env, link: link})
	f.saveLocked()
}

// forget stops tracking the request with the routed id, if tracked, and
// reports whether it was. It does not save: the caller calls persist once
// the answer's event is queued in the store.
func (f *inflight) forget(id string) bool {
	if id == "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.reqs {
		if r.env.ID == id {
			f.reqs = append(f.reqs[:i], f.reqs[i+1:]...)
			return true
		}
	}
	return false
}

// persist queues the current list in the store.
func (f *inflight) persist() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saveLocked()
}

func (f *inflight) saveLocked() {
	if f.save == nil {
		return
	}
	list := make([]wire.Envelope, len(f.reqs))
	for i, r := range f.reqs {
		list[i] = r.env
	}
	f.save(list)
}

// restore tracks reqs, read from the store, as written on no current link.
func (f *inflight) restore(reqs []wire.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, env := range reqs {
		f.reqs = append(f.reqs, sentReq{env: env})
	}
}

// take returns the unanswered requests, oldest first, and forgets them
// (the store keeps them until the writer tracks them again).
func (f *inflight) take() []wire.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := make([]wire.Envelope, len(f.reqs))
	for i, r := range f.reqs {
		reqs[i] = r.env
	}
	f.reqs = nil
	return reqs
}

// stale returns the unanswered requests written on a link other than
// link, oldest first; they stay tracked.
func (f *inflight) stale(link uint64) []wire.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.Envelope
	for _, r := range f.reqs {
		if r.link != link {
			out = append(out, r.env)
		}
	}
	return out
}

// loadInflight restores the thread's stored requests in flight and saves
// later changes. It runs in New.
func (l *Link) loadInflight() {
	reqs, err := l.cfg.Store.Inflight(l.id)
	if err != nil {
		l.log.Error("read requests in flight; they are not sent again", "err", err)
	}
	if len(reqs) > 0 {
		l.log.Info("requests in flight before the restart; sent again after the agent's replay", "requests", len(reqs))
		l.sent.restore(reqs)
	}
	l.sent.save = func(reqs []wire.Envelope) { l.cfg.Store.SaveInflight(l.id, reqs) }
}

// resend hands the requests the old agent never answered to the new one.
// It runs on replace, after the new connection started.
func (l *Link) resend() {
	l.queueAgain(l.sent.take(), "sending the new agent the requests the old one never answered")
}

// resendStale sends again the requests written on an earlier link (or
// before a restart) that the agent has not answered, not even in the
// replay it just sent: it runs once the current link's replay is
// processed (resume.go). An agent that had accepted one answers accepted.
func (l *Link) resendStale() {
	l.mu.Lock()
	link := l.cur.n
	l.mu.Unlock()
	l.queueAgain(l.sent.stale(link), "sending the agent again the requests it has not answered")
}

// queueAgain queues reqs for the agent writer on a goroutine counted in
// Config.Group (it ends when they are queued or the thread ends). It runs
// on a reader, also counted there, so the thread is not waiting yet.
func (l *Link) queueAgain(reqs []wire.Envelope, msg string) {
	if len(reqs) == 0 {
		return
	}
	l.log.Info(msg, "requests", len(reqs))
	l.cfg.Group.Add(1)
	go func() {
		defer l.cfg.Group.Done()
		for _, env := range reqs { // the writer tracks them again
			put := func() bool { return l.requests.Send(env) }
			if l.enqueue(l.requests, put, nil, 0) != nil { // write.go: only the thread's end stops it
				return
			}
		}
	}()
}
