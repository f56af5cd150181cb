package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/agentlink"
	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/internal/clientmsg"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/threadlog"
	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	// agentSendWait bounds handing a request (or terminal input) to a busy
	// agent writer: agentlink.RequestQueueLen of them may wait for it.
	agentSendWait = 10 * time.Second
	// inspectWait bounds asking the engine for a stopped sandbox's log.
	inspectWait = 3 * time.Second
)

// thread is one conversation: its agent link, event log and attached
// clients. The link's goroutines (bridge/agentlink: one reader and one
// writer per agent connection) are counted in wg and waited for by
// shutdown; when a sandbox is replaced the old reader starts the next pair
// before it returns. It is a member of its box in the fleet (fleet.Member)
// and the link's agentlink.Thread.
type thread struct {
	id    string
	log   *slog.Logger
	mgr   sandbox.Manager
	srv   *Server
	store eventStore
	// box is the sandbox the thread runs in (bridge/fleet); created is
	// when the thread was made.
	box     *fleet.Box
	created time.Time
	link    *agentlink.Link // the agent connection, and the next one

	// ctx ends when the thread ends (shutdown): everything that waits on
	// the thread selects on ctx.Done(); stop is the same channel, for
	// terminal.go.
	ctx      context.Context
	cancel   context.CancelFunc
	stop     <-chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	term *termRelay       // terminal sessions' watchers (terminal.go)
	gate *approval.Gate   // approval policy, pending requests, held output (bridge/approval)
	host *hosttools.Calls // the agent's host tool messages (hosttools.go)

	mu      sync.Mutex
	events  threadlog.Log      // numbering, tail, whether the agent works
	clients map[string]*client // by connection id
	closing bool
}

// newThread starts the agent link for a connected, greeted agent. Its
// events are numbered after last, the newest seq st holds for id.
func newThread(s *Server, id string, agent *websocket.Conn, b *fleet.Box, last uint64, log *slog.Logger) *thread {
	ctx, cancel := context.WithCancel(context.Background())
	t := &thread{
		id: id, log: log, mgr: s.cfg.Manager, box: b, srv: s, store: s.events, created: time.Now().UTC(),
		ctx: ctx, cancel: cancel, stop: ctx.Done(),
		term:    newTermRelay(),
		events:  threadlog.New(last, s.cfg.MaxStoredOutput),
		clients: make(map[string]*client),
	}
	t.gate = t.newGate()      // approvals.go
	t.host = t.newHostCalls() // hosttools.go
	t.link = agentlink.New(ctx, agent, agentlink.Config{
		ID: id, Log: log, Thread: t, Fleet: s.fleet, Box: b, Manager: s.cfg.Manager, Store: s.events,
		Server: s.ctx, Group: &t.wg, LogEmpty: last == 0,
	})
	t.link.Start()
	t.watchTokens() // llmtoken.go
	t.wg.Add(1)
	go t.restoreApprovals() // approvals.go
	return t
}

// deadCh is closed when the current agent connection has ended.
func (t *thread) deadCh() <-chan struct{} { return t.link.Dead() }

// attach adds c to the thread. Its writer sends hello first, then every
// event after afterSeq from the tail or the store, then live ones, by
// cursor (client.go): nothing is queued per client, so none is missed or
// sent twice. It returns false if the thread is shutting down.
func (t *thread) attach(c *client) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.clients[c.id] = c
	return true
}

func (t *thread) detach(c *client) {
	t.term.removeAll(c)
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, c.id)
}

// request forwards a client's request to the agent with its id prefixed by
// the connection id, or answers the client when it cannot. It blocks at most
// agentSendWait.
func (t *thread) request(c *client, env wire.Envelope) {
	if t.approvalRequest(c, env) { // approve, deny (approvals.go)
		return
	}
	if wire.IsTerminal(env.Type) && !t.terminalRequest(c, env) { // terminal.go
		return
	}
	if refusal, refused := clientmsg.Refusal(t.id, env); refused { // not a request for the agent
		c.enqueue(refusal)
		return
	}
	origID := env.ID
	env.Thread, env.Seq, env.ID = t.id, 0, agentlink.RoutedID(c.id, origID, env.Type)
	switch err := t.link.Send(env, agentSendWait); {
	case errors.Is(err, agentlink.ErrAgentGone):
		c.enqueue(wire.ErrorEnvelope(t.id, origID, wire.CodeSandboxUnavailable, "sandbox stopped"))
	case errors.Is(err, agentlink.ErrAgentBusy):
		c.enqueue(wire.ErrorEnvelope(t.id, origID, wire.CodeSandboxUnavailable, "agent is not accepting requests"))
	} // nil: queued; ErrThreadEnded: the client is being closed
}

// shutdown detaches and closes every client (after sending final, when it
// has a type), closes the agent connection and waits for the thread's
// goroutines. It does not remove the sandbox. It is idempotent.
func (t *thread) shutdown(final wire.Envelope) {
	t.stopOnce.Do(func() {
		t.mu.Lock()
		t.closing = true
		clients := t.clients
		t.clients = map[string]*client{}
		t.mu.Unlock()
		t.link.Stop() // a connection lost from now on is not replaced
		for _, c := range clients {
			if final.Type != "" {
				c.kick(closeNormal, "thread closed", &final)
			} else {
				c.kick(closeGoingAway, "bridge shutting down", nil)
			}
		}
		t.cancel()
		t.wg.Wait()
	})
}

// ID is the thread's id (fleet.Member).
func (t *thread) ID() string { return t.id }

// Attached reports whether a client is attached (fleet.Member).
func (t *thread) Attached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients) > 0
}

// Publish adds an event of the sandbox's proxies to the log
// (fleet.Member).
func (t *thread) Publish(env wire.Envelope) { t.publish(env) }

// Suspend ends the thread for its suspended sandbox (fleet.Member): it
// leaves the server, logs ev and closes its clients with it.
func (t *thread) Suspend(ev wire.SandboxExited) {
	s := t.srv
	s.mu.Lock()
	if s.threads[t.id] == t {
		delete(s.threads, t.id)
	}
	s.mu.Unlock()
	final := t.logEvent(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
	t.shutdown(final)
}

// Deliver takes an agent message that is not an event
// (agentlink.Thread): a tool_check, a terminal message, or a reply for
// the client connID names.
func (t *thread) Deliver(env wire.Envelope, connID string, routed bool) {
	if env.Type == wire.TypeToolCheck { // approvals.go
		t.toolCheck(env)
		return
	}
	if t.host.Handle(t.ctx, t.deadCh(), env) { // hosttools.go
		return
	}
	if wire.IsTerminal(env.Type) && t.terminalFromAgent(env, connID) {
		return
	}
	t.mu.Lock()
	c := t.clients[connID]
	t.mu.Unlock()
	if !routed || c == nil {
		t.log.Debug("reply without a client", "type", env.Type, "id", env.ID)
		return
	}
	c.reply(env)
}

// TerminalOutput fans an agent's terminal frame out (agentlink.Thread,
// terminal.go).
func (t *thread) TerminalOutput(frame []byte) { t.terminalOutput(frame) }

// SandboxExited publishes that sb stopped, and logs why
// (agentlink.Thread).
func (t *thread) SandboxExited(sb sandbox.Sandbox) wire.SandboxExited {
	ev := fleet.ExitEvent(sb)
	t.publish(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
	t.logExit(sb, ev.Message) // threads.go
	return ev
}
