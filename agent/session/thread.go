package session

import (
	"context"
	"log/slog"
	"sync"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// thread is one conversation: its history, its running turn, its event
// numbering and the connections watching it.
type thread struct {
	s    *Server
	name string
	log  *slog.Logger
	conv loop.Conversation

	mu     sync.Mutex
	seq    uint64
	conns  map[*conn]struct{}
	cancel context.CancelFunc // of the running turn; nil when idle

	runs    map[uint64]context.CancelFunc // running run_tool requests (runtool.go)
	nextRun uint64

	history []wire.Envelope // history frames not yet applied (history.go)
	backlog backlog         // the newest events, for a bridge's resume (backlog.go)

	accepted acceptedIDs     // a bridge's requests already accepted (accepted.go)
	calls    map[string]bool // running tool calls by call id (backlog.go)
	// resumeWake is closed (and cleared) when a bridge connection is
	// resumed: tool checks wait for it (approval.go).
	resumeWake chan struct{}
	// hadBridge is set once a bridge connection resumed: from then on a
	// tool check waits for a bridge rather than run unchecked.
	hadBridge bool
}

func newThread(s *Server, name string) *thread {
	return &thread{s: s, name: name, log: s.log.With("thread", name), conns: make(map[*conn]struct{})}
}

// attach queues hello for c and then subscribes c to the thread's events,
// so hello is the first thing c receives. (A bridge asks for the backlog
// with a resume request, backlog.go.)
func (t *thread) attach(c *conn, hello wire.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.reply(hello) {
		t.conns[c] = struct{}{}
	}
}

// detach unsubscribes c. The running turn, if any, goes on.
func (t *thread) detach(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

// startTurn starts a turn for a user_message with the given id, or
// answers busy if one is running. It does not block.
func (t *thread) startTurn(c *conn, id, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.repeatedLocked(c, id) { // accepted.go: a bridge sent it again
		return
	}
	if t.cancel != nil {
		c.reply(wire.ErrorEnvelope(t.name, id, wire.CodeBusy, "a turn is already running on this thread"))
		return
	}
	if !t.s.track() {
		c.reply(wire.ErrorEnvelope(t.name, id, wire.CodeInternal, "the agent is shutting down"))
		return
	}
	// withThread: tool checks (approval.go); tools.WithThread: the shell
	// this thread's commands remember (cwd and exports, per thread).
	ctx, cancel := context.WithCancel(tools.WithThread(withThread(t.s.hard, t), t.name))
	t.cancel = cancel
	t.emitLocked(id, wire.MustNew(wire.TypeUserEcho, "", "", wire.UserMessage{Text: text}))
	t.acceptLocked(c, id)
	t.log.Info("turn started", "id", id)
	go t.runTurn(ctx, cancel, id, text)
}

// runTurn runs on a goroutine tracked by the server's WaitGroup.
func (t *thread) runTurn(ctx context.Context, cancel context.CancelFunc, id, text string) {
	defer t.s.wg.Done()
	defer cancel()
	done := t.s.loop.Turn(ctx, &t.conv, text, func(env wire.Envelope) { t.emit(id, env) })
	t.log.Info("turn done", "id", id, "reason", done.Reason)
}

// interrupt cancels the running turn and run_tool requests, if any.
func (t *thread) interrupt() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
	for _, cancel := range t.runs {
		cancel()
	}
}

// emit numbers a turn's event and fans it out. turn_done also marks the
// thread idle, in the same critical section, so that a client that has
// seen turn_done can start the next turn at once.
func (t *thread) emit(id string, env wire.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if env.Type == wire.TypeTurnDone {
		t.cancel = nil
	}
	t.emitLocked(id, env)
}

// emitLocked stamps env with the thread, id and next seq, keeps it in the
// backlog and queues it for every attached connection; a client that
// cannot keep up is dropped (the bridge is waited for).
func (t *thread) emitLocked(id string, env wire.Envelope) {
	t.seq++
	env.Seq, env.Thread, env.ID = t.seq, t.name, id
	t.backlog.add(env)
	t.trackCallLocked(env) // backlog.go
	for c := range t.conns {
		if !c.enqueue(outgoing{env: env}) {
			delete(t.conns, c)
		}
	}
}
