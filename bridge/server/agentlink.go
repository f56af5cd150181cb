package server

// An agent link is one WebSocket connection from the bridge to a thread's
// agent. A thread has one at a time: when it drops, the thread reconnects
// to the same sandbox or replaces the sandbox (replace.go), and starts a
// new link. Each link has a reader (readAgent: agent messages into the
// log and to clients) and a writer (writeAgent: requests and pings to the
// agent), both owned by the thread.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// agentLink is one agent connection's lifetime: dead is closed by its
// readAgent when it ends; writerDone when its writeAgent returned.
type agentLink struct {
	n          uint64 // numbers the link (inflight.go)
	conn       *websocket.Conn
	dead       chan struct{}
	deadOnce   sync.Once
	writerDone chan struct{}
}

func newLink(conn *websocket.Conn) *agentLink {
	return &agentLink{n: linkSeq.Add(1), conn: conn, dead: make(chan struct{}), writerDone: make(chan struct{})}
}

// startLink starts l's reader and writer.
func (t *thread) startLink(l *agentLink) {
	t.wg.Add(2)
	go t.readAgent(l)
	go t.writeAgent(l)
}

// deadCh is closed when the current agent connection has ended.
func (t *thread) deadCh() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.link.dead
}

// readAgent reads l's messages until the connection ends, then reports
// the sandbox as stopped and replaces it (replace.go) unless the thread is
// shutting down.
func (t *thread) readAgent(l *agentLink) {
	defer t.wg.Done()
	conn := l.conn
	defer conn.Close()
	t.linkStarted() // resume.go: agent events wait for resumed
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error {
		return conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	var scratch []byte // terminal frames are read through it (terminal.go)
	for {
		mt, r, err := conn.NextReader()
		if err != nil {
			l.markDead() // before telling clients, so their next request fails fast
			t.agentLost(l, err)
			return
		}
		if mt == websocket.BinaryMessage { // terminal output (terminal.go)
			data, err := readAgentFrame(r, &scratch)
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
	if answersRequest(env) && t.sent.forget(env.ID) { // the agent has it (inflight.go)
		defer t.sent.persist() // stored behind the answer's event
	}
	connID, id, routed := strings.Cut(env.ID, "/")
	if routed {
		env.ID, connID = id, connOf(connID)
	}
	if env.Seq > 0 {
		t.agentEvent(env)          // resume.go: duplicates dropped, gaps reported
		t.replayPublished(env.Seq) // turnend.go
		return
	}
	if env.Type == wire.TypeAccepted { // a request sent again that the agent ran already
		t.log.Info("agent had accepted the request sent again", "id", env.ID)
		return
	}
	if t.resumeAnswer(env) { // resume.go
		t.noteResumed(env) // turnend.go
		return
	}
	if env.Type == wire.TypeToolCheck { // approvals.go
		t.toolCheck(env)
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

// agentLost publishes why l's agent went away — a sandbox_exited event
// when the engine reports the sandbox stopped — and then replaces the
// sandbox (replace.go); when that fails, an error sandbox_unavailable.
func (t *thread) agentLost(l *agentLink, err error) {
	t.mu.Lock()
	closing := t.closing
	t.mu.Unlock()
	if closing || t.replacedLoss(l) { // lifecycle.go: recycled or shared sandboxes
		return
	}
	sb, stopped := t.exitState()
	msg := fmt.Sprintf("sandbox stopped: agent connection lost: %v", err)
	ev := wire.SandboxExited{Reason: wire.ExitDied, Message: msg}
	if stopped {
		ev = exitEvent(sb)
		msg = ev.Message
		t.publish(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
		t.logExit(sb, msg) // threads.go
	}
	t.log.Warn("agent connection lost", "reason", msg)
	<-l.writerDone
	if !stopped && t.reconnect() == nil { // replace.go: the sandbox still runs
		return
	}
	t.endLostWork(msg) // turnend.go: the replacement runs none of it
	if rerr := t.replace(ev); rerr != nil {
		t.log.Error("replace sandbox", "err", rerr)
		t.publish(wire.ErrorEnvelope(t.id, "", wire.CodeSandboxUnavailable, "%s; no replacement: %v", msg, rerr))
	}
}

// exitState polls the engine briefly for the sandbox's exit; stopped is
// false when it did not learn of one.
func (t *thread) exitState() (sb sandbox.Sandbox, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	for {
		sb, err := t.mgr.Inspect(ctx, t.box.SandboxID())
		if err == nil && !sb.Running {
			return sb, true
		}
		select {
		case <-ctx.Done():
			return sandbox.Sandbox{}, false
		case <-t.ctx.Done():
			return sandbox.Sandbox{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// markDead closes l.dead once.
func (l *agentLink) markDead() { l.deadOnce.Do(func() { close(l.dead) }) }

// writeAgent writes queued requests and pings to l until the thread
// stops or l fails; it closes the connection when it returns.
func (t *thread) writeAgent(l *agentLink) {
	defer t.wg.Done()
	defer close(l.writerDone)
	defer l.conn.Close()
	ticker := time.NewTicker(pingPeriod)
	defer ticker.Stop()
	if err := writeEnvelope(l.conn, t.resumeRequest()); err != nil { // resume.go: first
		t.log.Warn("ask agent to resume", "err", err)
		return
	}
	for {
		select {
		case env := <-t.toAgent:
			if startsWork(env.Type) {
				t.sent.add(env, l.n) // before the agent can answer it (inflight.go)
			}
			if err := writeEnvelope(l.conn, env); err != nil {
				t.log.Warn("write to agent", "err", err)
				return
			}
		case data := <-t.term.input:
			if err := t.writeAgentInput(data); err != nil {
				t.log.Warn("write terminal input to agent", "err", err)
				return
			}
		case <-ticker.C:
			if err := l.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				t.log.Warn("ping agent", "err", err)
				return
			}
		case <-l.dead:
			return
		case <-t.ctx.Done():
			msg := websocket.FormatCloseMessage(closeGoingAway, "thread closed")
			_ = l.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
			return
		}
	}
}
