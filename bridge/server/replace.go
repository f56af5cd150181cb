package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// maxHistoryFrame bounds one history frame, under wire.MaxMessageBytes
// with room for the envelope.
const maxHistoryFrame = wire.MaxMessageBytes - 64<<10

// historyTypes are the logged events a new agent rebuilds its conversation
// from (agent/loop.FromEvents).
var historyTypes = map[wire.Type]bool{
	wire.TypeUserEcho: true, wire.TypeAssistantMessage: true, wire.TypeToolCall: true,
	wire.TypeToolResult: true, wire.TypeTurnDone: true,
}

// replace starts a new sandbox for a thread whose agent went away: the
// same workspace volume, socket folder and proxies, a new container (made
// once for all the threads of a shared sandbox, fleet.Replace), the
// thread's own conversation handed over as history; then it publishes
// sandbox_replaced and starts the new agent goroutines. It runs on the old
// link's readAgent, after that link's writer returned; shutdown stops a
// replacement under way.
func (t *thread) replace(why wire.SandboxExited) error {
	f := t.srv.fleet
	ctx, cancel := t.linkContext(fleet.ReplaceTimeout)
	defer cancel()
	sbID, conn, err := f.Replace(ctx, t.box, t.id, why)
	if err != nil {
		return err
	}
	n, err := t.sendHistory(conn)
	if err != nil {
		conn.Close()
		return err
	}
	l, err := t.installLink(conn)
	if err != nil {
		return err
	}
	f.Linked(t.box, t.id, sbID)
	t.log.Info("sandbox replaced", "sandbox", sbID, "reason", why.Reason, "history_events", n)
	t.publish(wire.MustNew(wire.TypeSandboxReplaced, t.id, "", wire.SandboxReplaced{
		Reason: why.Reason, SandboxID: sbID, Restored: n,
		Message: fmt.Sprintf("sandbox replaced (%s); workspace and conversation kept", why.Message),
	}))
	t.startLink(l)
	t.resend() // inflight.go
	return nil
}

// linkContext is the context of work on t's next agent link (replace,
// reconnect): it ends after timeout, when the server closes or when the
// thread ends. The caller must call cancel.
func (t *thread) linkContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	stop := context.AfterFunc(t.srv.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// reconnectTimeout bounds greeting again the agent of a sandbox that still
// runs after its connection ended.
const reconnectTimeout = 10 * time.Second

// reconnect greets again the agent of the thread's sandbox, which the
// engine reports still running although the agent connection ended (an
// agent drops a peer that falls behind its output; a network hiccup on the
// socket): the sandbox and its running work are kept, not replaced. The
// new link asks the agent to resume after the thread's agent cursor, so it
// replays what it made while no bridge was attached (resume.go). It runs
// on the old link's readAgent after that link's writer returned, like
// replace, and fails when the agent does not answer within
// reconnectTimeout, the sandbox exits, or the thread stops.
func (t *thread) reconnect() error {
	ctx, cancel := t.linkContext(reconnectTimeout)
	defer cancel()
	conn, err := t.srv.fleet.Greet(ctx, t.box, t.id)
	if err != nil {
		t.log.Warn("agent of the running sandbox did not answer again", "err", err)
		return err
	}
	l, err := t.installLink(conn)
	if err != nil {
		return err
	}
	t.log.Warn("agent connection lost while its sandbox runs; greeted it again")
	t.startLink(l)
	return nil
}

// sendHistory writes the thread's conversation events to a newly greeted
// agent, in frames under maxHistoryFrame, before anything else is sent to
// it. It returns how many events it sent.
func (t *thread) sendHistory(conn *websocket.Conn) (int, error) {
	return sendHistory(conn, t.store, t.id, t.log)
}

// sendHistory writes thread id's conversation events from st to a newly
// greeted agent (see thread.sendHistory).
func sendHistory(conn *websocket.Conn, st eventStore, id string, log *slog.Logger) (int, error) {
	st.Flush()
	var all []wire.Envelope
	for after := uint64(0); ; {
		evs, err := st.Events(id, after, 4096)
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
		for _, e := range evs {
			if historyTypes[e.Type] {
				all = append(all, e)
			}
		}
	}
	if len(all) == 0 {
		return 0, nil
	}
	var chunk []wire.Envelope
	size, sent := 0, 0
	flush := func(more bool) error {
		env := wire.MustNew(wire.TypeHistory, id, "", wire.History{Events: chunk, More: more})
		sent += len(chunk)
		chunk, size = nil, 0
		return writeEnvelope(conn, env)
	}
	for _, e := range all {
		n := len(e.Data) + len(e.ID) + 64
		if n > maxHistoryFrame {
			log.Warn("history event too large to hand over; skipped", "seq", e.Seq, "type", e.Type, "bytes", n)
			continue
		}
		if size+n > maxHistoryFrame {
			if err := flush(true); err != nil {
				return sent, fmt.Errorf("send history: %w", err)
			}
		}
		chunk = append(chunk, e)
		size += n
	}
	if err := flush(false); err != nil {
		return sent, fmt.Errorf("send history: %w", err)
	}
	return sent, nil
}

// installLink makes conn the thread's agent connection, unless the thread
// is closing (conn is then closed). The caller starts the link once it has
// said what happened. It runs where no writeAgent runs (replace,
// reconnect).
func (t *thread) installLink(conn *websocket.Conn) (*agentLink, error) {
	l := newLink(conn)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		conn.Close()
		return nil, errors.New("thread closed")
	}
	t.agent = conn
	t.link = l
	return l, nil
}
