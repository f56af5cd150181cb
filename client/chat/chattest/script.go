package chattest

import (
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// WaitInterrupt, as the Type of a scripted envelope, pauses the turn until
// the client sends interrupt; the turn then ends with turn_done
// "interrupted" and the rest of the script is skipped.
const WaitInterrupt wire.Type = "chattest.wait_interrupt"

// WaitApproval, as the Type of a scripted envelope whose Data is a
// wire.ApprovalRequest, sends that approval_request event and pauses the
// turn until the client answers it (approve or deny naming its
// approval_id); it then sends the approval_decision (By "c_test", with
// the client's reason) and goes on. An answer naming any other id gets an
// error not_found, as from a bridge.
const WaitApproval wire.Type = "chattest.wait_approval"

// Script answers the text of a user message with the events of its turn,
// after the user_echo that Scripted sends itself. Thread, Seq and ID are
// filled in; the script should end with a turn_done.
type Script func(text string) []wire.Envelope

// Scripted is a Handler that acts like an agent: it does the handshake
// (binding thread, see Peer.Handshake, and continuing the seq after the
// client's after_seq), answers ping with pong, plays script for each
// user_message (answering busy while a turn runs) and honours interrupt.
func Scripted(thread string, script Script) func(*Peer) {
	return func(p *Peer) {
		h, err := p.Handshake(thread)
		if err != nil {
			return
		}
		p.SetSeq(h.AfterSeq)
		t := &turns{p: p, script: script, done: make(chan struct{})}
		defer t.wg.Wait()
		defer p.Close()
		defer close(t.done)
		for {
			env, err := p.Recv()
			if err != nil {
				return
			}
			t.handle(env)
		}
	}
}

// turns runs at most one scripted turn at a time.
type turns struct {
	p      *Peer
	script Script
	wg     sync.WaitGroup
	done   chan struct{} // closed when the connection's read loop ends

	mu        sync.Mutex
	running   bool
	interrupt chan struct{}      // of the running turn, capacity 1
	pending   string             // the approval id the turn waits for
	answers   chan wire.Envelope // approve/deny of pending, capacity 1
}

func (t *turns) handle(env wire.Envelope) {
	switch env.Type {
	case wire.TypePing:
		_ = t.p.Send(wire.Envelope{Type: wire.TypePong, ID: env.ID})
	case wire.TypeInterrupt:
		t.mu.Lock()
		if t.running {
			select {
			case t.interrupt <- struct{}{}:
			default:
			}
		}
		t.mu.Unlock()
	case wire.TypeApprove, wire.TypeDeny:
		t.answer(env)
	case wire.TypeUserMessage:
		var msg wire.UserMessage
		if err := env.Decode(&msg); err != nil {
			_ = t.p.Send(wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "%v", err))
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.running {
			_ = t.p.Send(wire.ErrorEnvelope("", env.ID, wire.CodeBusy, "a turn is running"))
			return
		}
		t.running = true
		t.interrupt = make(chan struct{}, 1)
		stop := t.interrupt
		t.wg.Go(func() { t.play(env.ID, msg.Text, stop) })
	default:
		_ = t.p.Send(wire.ErrorEnvelope("", env.ID, wire.CodeUnknownType, "unknown type %q", env.Type))
	}
}

// play sends one turn's events; it marks the turn finished just before its
// turn_done, so a client may start the next turn as soon as it sees it.
func (t *turns) play(id, text string, interrupt <-chan struct{}) {
	finish := func() {
		t.mu.Lock()
		t.running = false
		t.mu.Unlock()
	}
	defer finish()
	_ = t.p.Event(wire.MustNew(wire.TypeUserEcho, "", id, wire.UserMessage{Text: text}))
	for _, env := range t.script(text) {
		env.ID = id
		switch env.Type {
		case WaitInterrupt:
			select {
			case <-interrupt:
			case <-t.done:
				return
			}
			finish()
			_ = t.p.Event(wire.MustNew(wire.TypeTurnDone, "", id, wire.TurnDone{Reason: wire.ReasonInterrupted}))
			return
		case WaitApproval:
			if !t.waitApproval(env) {
				return
			}
			continue
		case wire.TypeTurnDone:
			finish()
		}
		if t.p.Event(env) != nil {
			return
		}
	}
}

// answer hands an approve or deny to the turn waiting for its id, or
// answers not_found.
func (t *turns) answer(env wire.Envelope) {
	var a wire.ApprovalAnswer
	_ = env.Decode(&a)
	t.mu.Lock()
	ok := t.pending != "" && a.ApprovalID == t.pending
	if ok {
		t.pending = ""
		t.answers <- env
	}
	t.mu.Unlock()
	if !ok {
		_ = t.p.Send(wire.ErrorEnvelope("", env.ID, wire.CodeNotFound,
			"no pending approval %q on this thread (already decided or expired)", a.ApprovalID))
	}
}

// waitApproval plays a WaitApproval step; it reports false when the
// connection ended first.
func (t *turns) waitApproval(step wire.Envelope) bool {
	var req wire.ApprovalRequest
	if err := step.Decode(&req); err != nil {
		return false
	}
	answers := make(chan wire.Envelope, 1)
	t.mu.Lock()
	t.pending, t.answers = req.ApprovalID, answers
	t.mu.Unlock()
	if t.p.Event(wire.MustNew(wire.TypeApprovalRequest, "", "", req)) != nil {
		return false
	}
	var env wire.Envelope
	select {
	case env = <-answers:
	case <-t.done:
		return false
	}
	var a wire.ApprovalAnswer
	_ = env.Decode(&a)
	verdict := wire.VerdictApproved
	if env.Type == wire.TypeDeny {
		verdict = wire.VerdictDenied
	}
	return t.p.Event(wire.MustNew(wire.TypeApprovalDecision, "", "", wire.ApprovalDecision{
		ApprovalID: req.ApprovalID, ApprovalAction: req.ApprovalAction, Verdict: verdict,
		By: "c_test", At: time.Now().UTC().Format(time.RFC3339), Reason: a.Reason,
	})) == nil
}
