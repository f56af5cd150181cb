package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	// agentSendBuffer is how many requests may wait for the agent writer.
	agentSendBuffer = 64
	// agentSendWait bounds handing a request to a busy agent writer.
	agentSendWait = 10 * time.Second
	// inspectWait bounds asking the engine why an agent went away; the
	// engine may report the exit a moment after the socket closes.
	inspectWait = 3 * time.Second
)

// thread is one conversation: its agent connection, event log and attached
// clients. Its two goroutines (readAgent, writeAgent) are owned by the
// thread and waited for by shutdown.
type thread struct {
	id    string
	log   *slog.Logger
	mgr   sandbox.Manager
	res   *resources
	agent *websocket.Conn
	// box is the sandbox the thread runs in, set by Server.register;
	// created is when the thread was made.
	box     *box
	created time.Time

	toAgent  chan wire.Envelope
	term     *termRelay    // terminal sessions' watchers and input (terminal.go)
	dead     chan struct{} // closed by readAgent (markDead) when the agent connection ends
	deadOnce sync.Once
	stop     chan struct{} // closed by shutdown
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	events  eventLog
	clients map[string]*client // by connection id
	closing bool
}

// newThread starts the agent goroutines for a connected, greeted agent.
func newThread(id string, agent *websocket.Conn, res *resources, mgr sandbox.Manager, log *slog.Logger) *thread {
	t := &thread{
		id: id, log: log, mgr: mgr, res: res, agent: agent, created: time.Now().UTC(),
		toAgent: make(chan wire.Envelope, agentSendBuffer),
		term:    newTermRelay(),
		dead:    make(chan struct{}),
		stop:    make(chan struct{}),
		clients: make(map[string]*client),
	}
	t.wg.Add(2)
	go t.readAgent()
	go t.writeAgent()
	return t
}

// attach adds c to the thread and returns what its writer sends first: the
// hello answer, then every logged event after afterSeq. Taking both under
// the lock means live events (queued on c) follow with no gap or
// duplicate. It returns false if the thread is shutting down.
func (t *thread) attach(c *client, hello wire.Envelope, afterSeq uint64) ([]wire.Envelope, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return nil, false
	}
	t.clients[c.id] = c
	return append([]wire.Envelope{hello}, t.events.after(afterSeq)...), true
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
	switch {
	case wire.IsTerminal(env.Type) && !t.terminalRequest(c, env):
		return
	case wire.IsRequest(env.Type):
	case env.Type == wire.TypeHello:
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeBadMessage, "hello was already exchanged"))
		return
	default:
		if !wire.Known(env.Type) {
			c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeUnknownType, "unknown message type %q", env.Type))
			return
		}
		c.enqueue(wire.ErrorEnvelope(t.id, env.ID, wire.CodeBadMessage, "%s is not a request", env.Type))
		return
	}
	origID := env.ID
	env.Thread, env.Seq, env.ID = t.id, 0, c.id+"/"+origID
	select {
	case <-t.dead:
		c.enqueue(wire.ErrorEnvelope(t.id, origID, wire.CodeSandboxUnavailable, "sandbox stopped"))
		return
	default:
	}
	timer := time.NewTimer(agentSendWait)
	defer timer.Stop()
	select {
	case t.toAgent <- env:
	case <-t.dead:
		c.enqueue(wire.ErrorEnvelope(t.id, origID, wire.CodeSandboxUnavailable, "sandbox stopped"))
	case <-t.stop:
	case <-timer.C:
		c.enqueue(wire.ErrorEnvelope(t.id, origID, wire.CodeSandboxUnavailable, "agent is not accepting requests"))
	}
}

// readAgent reads the agent's messages until its connection ends, then
// reports the sandbox as stopped unless the thread is shutting down.
func (t *thread) readAgent() {
	defer t.wg.Done()
	defer t.markDead()
	defer t.agent.Close()
	_ = t.agent.SetReadDeadline(time.Now().Add(pongWait))
	t.agent.SetPongHandler(func(string) error {
		return t.agent.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		mt, r, err := t.agent.NextReader()
		if err != nil {
			t.markDead() // before telling clients, so their next request fails fast
			t.agentLost(err)
			return
		}
		if mt == websocket.BinaryMessage { // terminal output (terminal.go)
			data, err := io.ReadAll(io.LimitReader(r, maxInputFrame+1))
			if err == nil {
				t.terminalOutput(data)
			}
			continue
		}
		env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
		if err != nil {
			t.log.Warn("bad frame from agent", "err", err)
			continue
		}
		t.fromAgent(env)
	}
}

// fromAgent routes one agent message: events are numbered, logged and
// fanned out; replies go to the client named by their id prefix.
func (t *thread) fromAgent(env wire.Envelope) {
	env.Thread = t.id
	connID, id, routed := strings.Cut(env.ID, "/")
	if routed {
		env.ID = id
	}
	if env.Seq > 0 {
		t.publish(env)
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
	c.enqueue(env)
}

// publish numbers env with the thread's next seq, logs it and queues it for
// every attached client.
func (t *thread) publish(env wire.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	env = t.events.append(env)
	for _, c := range t.clients {
		c.enqueue(env)
	}
}

// agentLost publishes why the agent went away: a sandbox_exited event
// when the engine reports the sandbox stopped, then an error
// sandbox_unavailable either way.
func (t *thread) agentLost(err error) {
	t.mu.Lock()
	closing := t.closing
	t.mu.Unlock()
	if closing {
		return
	}
	sb, stopped := t.exitState()
	msg := fmt.Sprintf("sandbox stopped: agent connection lost: %v", err)
	if stopped {
		ev := exitEvent(sb)
		msg = ev.Message
		t.publish(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
	}
	t.log.Warn("agent connection lost", "reason", msg)
	t.publish(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "%s", msg))
}

// exitState polls the engine briefly for the sandbox's exit; stopped is
// false when it did not learn of one.
func (t *thread) exitState() (sb sandbox.Sandbox, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	for {
		sb, err := t.mgr.Inspect(ctx, t.res.sandboxID)
		if err == nil && !sb.Running {
			return sb, true
		}
		select {
		case <-ctx.Done():
			return sandbox.Sandbox{}, false
		case <-t.stop:
			return sandbox.Sandbox{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// markDead closes t.dead once.
func (t *thread) markDead() { t.deadOnce.Do(func() { close(t.dead) }) }

// logEvent numbers env and keeps it in the log without sending it to
// anyone: the caller hands it to shutdown as the clients' final message.
func (t *thread) logEvent(env wire.Envelope) wire.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.append(env)
}

// writeAgent writes queued requests and pings to the agent until the thread
// stops or the connection fails; it closes the connection when it returns.
func (t *thread) writeAgent() {
	defer t.wg.Done()
	defer t.agent.Close()
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	for {
		select {
		case env := <-t.toAgent:
			if err := writeEnvelope(t.agent, env); err != nil {
				t.log.Warn("write to agent", "err", err)
				return
			}
		case data := <-t.term.input:
			if err := t.writeAgentInput(data); err != nil {
				t.log.Warn("write terminal input to agent", "err", err)
				return
			}
		case <-ticker.C:
			if err := t.agent.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				t.log.Warn("ping agent", "err", err)
				return
			}
		case <-t.dead:
			return
		case <-t.stop:
			msg := websocket.FormatCloseMessage(closeGoingAway, "thread closed")
			_ = t.agent.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
			return
		}
	}
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
		for _, c := range clients {
			if final.Type != "" {
				c.kick(closeNormal, "thread closed", &final)
			} else {
				c.kick(closeGoingAway, "bridge shutting down", nil)
			}
		}
		close(t.stop)
		t.wg.Wait()
	})
}
