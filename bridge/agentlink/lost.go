package agentlink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// reconnectTimeout bounds greeting again the agent of a sandbox that still
// runs after its connection ended.
const reconnectTimeout = 10 * time.Second

// lost publishes why c's agent went away — a sandbox_exited event when
// the engine reports the sandbox stopped — and then reconnects to the
// sandbox that still runs, or replaces the stopped one; when that fails,
// an error sandbox_unavailable. It runs on c's reader.
func (l *Link) lost(c *connection, err error) {
	l.mu.Lock()
	closing := l.closing
	l.mu.Unlock()
	if closing || l.replacedLoss(c) { // recycled or shared sandboxes
		return
	}
	sb, stopped := l.exitState()
	msg := fmt.Sprintf("sandbox stopped: agent connection lost: %v", err)
	ev := wire.SandboxExited{Reason: wire.ExitDied, Message: msg}
	if stopped {
		ev = l.cfg.Thread.SandboxExited(sb)
		msg = ev.Message
	}
	l.log.Warn("agent connection lost", "reason", msg)
	<-c.pump.Done()
	if !stopped && l.reconnect() == nil { // the sandbox still runs
		return
	}
	l.endLostWork(msg) // turnend.go: the replacement runs none of it
	if rerr := l.replace(ev); rerr != nil {
		l.log.Error("replace sandbox", "err", rerr)
		l.cfg.Thread.Publish(wire.ErrorEnvelope(l.id, "", wire.CodeSandboxUnavailable, "%s; no replacement: %v", msg, rerr))
	}
}

// replacedLoss handles the end of c's agent connection when the fleet
// knows why (Fleet.LossCause: it removed the sandbox on purpose for its
// maximum lifetime or an image update, another thread already replaced the
// shared sandbox, or a shared sandbox stopped): it publishes
// sandbox_exited and replaces the sandbox. It returns false, doing
// nothing, when lost's own handling applies (a thread-scope sandbox that
// died, or a connection lost while the sandbox runs). While it replaces
// the sandbox, requests wait for the new connection (Link.Send) instead
// of failing: the sandbox went on purpose. It runs on c's reader.
func (l *Link) replacedLoss(c *connection) bool {
	ev, known := l.cfg.Fleet.LossCause(l.ctx, l.cfg.Box, l.id)
	if !known {
		return false
	}
	replacing := make(chan struct{})
	l.mu.Lock()
	l.replacing = replacing
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.replacing = nil
		l.mu.Unlock()
		close(replacing)
	}()
	l.cfg.Thread.Publish(wire.MustNew(wire.TypeSandboxExited, l.id, "", ev))
	l.log.Warn("agent connection ended: sandbox replaced", "reason", ev.Reason)
	l.endLostWork(ev.Message) // turnend.go: the replacement runs none of it
	<-c.pump.Done()
	if err := l.replace(ev); err != nil {
		l.log.Error("replace sandbox", "err", err)
		l.cfg.Thread.Publish(wire.ErrorEnvelope(l.id, "", wire.CodeSandboxUnavailable, "%s; no replacement: %v", ev.Message, err))
	}
	return true
}

// exitState polls the engine briefly for the sandbox's exit; stopped is
// false when it did not learn of one.
func (l *Link) exitState() (sb sandbox.Sandbox, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	for {
		sb, err := l.cfg.Manager.Inspect(ctx, l.cfg.Box.SandboxID())
		if err == nil && !sb.Running {
			return sb, true
		}
		select {
		case <-ctx.Done():
			return sandbox.Sandbox{}, false
		case <-l.ctx.Done():
			return sandbox.Sandbox{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replace starts a new sandbox for a thread whose agent went away: the
// same workspace volume, socket folder and proxies, a new container (made
// once for all the threads of a shared sandbox, Fleet.Replace), the
// thread's own conversation handed over as history; then it publishes
// sandbox_replaced and starts the new connection. It runs on the old
// connection's reader, after that connection's writer returned; the
// thread's end stops a replacement under way.
func (l *Link) replace(why wire.SandboxExited) error {
	ctx, cancel := l.nextContext(fleet.ReplaceTimeout)
	defer cancel()
	sbID, ws, err := l.cfg.Fleet.Replace(ctx, l.cfg.Box, l.id, why)
	if err != nil {
		return err
	}
	n, err := SendHistory(ws, l.cfg.Store, l.id, l.log)
	if err != nil {
		ws.Close()
		return err
	}
	c, err := l.install(ws)
	if err != nil {
		return err
	}
	l.cfg.Fleet.Linked(l.cfg.Box, l.id, sbID)
	l.log.Info("sandbox replaced", "sandbox", sbID, "reason", why.Reason, "history_events", n)
	l.cfg.Thread.Publish(wire.MustNew(wire.TypeSandboxReplaced, l.id, "", wire.SandboxReplaced{
		Reason: why.Reason, SandboxID: sbID, Restored: n,
		Message: fmt.Sprintf("sandbox replaced (%s); workspace and conversation kept", why.Message),
	}))
	l.start(c)
	l.resend() // inflight.go
	return nil
}

// reconnect greets again the agent of the thread's sandbox, which the
// engine reports still running although the agent connection ended (an
// agent drops a peer that falls behind its output; a network hiccup on the
// socket): the sandbox and its running work are kept, not replaced. The
// new connection asks the agent to resume after the thread's agent cursor,
// so it replays what it made while no bridge was attached (resume.go). It
// runs on the old connection's reader after that connection's writer
// returned, like replace, and fails when the agent does not answer within
// reconnectTimeout, the sandbox exits, or the thread ends.
func (l *Link) reconnect() error {
	ctx, cancel := l.nextContext(reconnectTimeout)
	defer cancel()
	ws, err := l.cfg.Fleet.Greet(ctx, l.cfg.Box, l.id)
	if err != nil {
		l.log.Warn("agent of the running sandbox did not answer again", "err", err)
		return err
	}
	c, err := l.install(ws)
	if err != nil {
		return err
	}
	l.log.Warn("agent connection lost while its sandbox runs; greeted it again")
	l.start(c)
	return nil
}

// nextContext is the context of work on the next connection (replace,
// reconnect): it ends after timeout, when the server closes or when the
// thread ends. The caller must call cancel.
func (l *Link) nextContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(l.ctx, timeout)
	stop := context.AfterFunc(l.cfg.Server, cancel)
	return ctx, func() { stop(); cancel() }
}

// install makes ws the current agent connection, unless the thread is
// ending (ws is then closed). The caller starts it once it has said what
// happened. It runs where no writer runs (replace, reconnect).
func (l *Link) install(ws *websocket.Conn) (*connection, error) {
	c := l.newConnection(ws)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		ws.Close()
		return nil, errors.New("thread closed")
	}
	l.cur = c
	l.live.Store(c) // its pump is held until start: a kick before then is seen by its first run
	return c, nil
}
