package chat

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Run sends text as a user message and reads Events until the turn's
// turn_done (the one carrying the message's id), calling fn, if not nil,
// for each event of the turn, turn_done included. Events of other turns
// (history replayed after hello, other clients' turns) are skipped.
//
// Run consumes Events, so nothing else may read Events while it runs; fn is
// called on Run's goroutine. It returns:
//   - the turn_done payload and nil when the turn ended normally (check
//     Reason: it may be interrupted, error or step_limit);
//   - a zero TurnDone and an error wrapping wire.Error when the server
//     answered the message with an error (e.g. busy);
//   - the turn_done payload and an error wrapping wire.Error when the turn
//     logged an error event (e.g. llm_error) before it ended;
//   - an error when the connection or ctx ended first. Run does not
//     interrupt the turn then; call Interrupt for that.
func (c *Conn) Run(ctx context.Context, text string, fn func(wire.Envelope)) (wire.TurnDone, error) {
	id, err := c.SendMessage(ctx, text)
	if err != nil {
		return wire.TurnDone{}, fmt.Errorf("run: %w", err)
	}
	return c.Await(ctx, id, fn)
}

// Await reads Events until the turn_done of the turn started by the
// user_message id, calling fn for each of the turn's events (and for
// approval events and errors answering other requests, which do not end
// the turn), and returns
// like Run. After a reconnect (Dial with the old connection's Thread and
// LastSeq) Await on the new connection picks the turn up where the old one
// left it. It consumes Events like Run.
func (c *Conn) Await(ctx context.Context, id string, fn func(wire.Envelope)) (wire.TurnDone, error) {
	var turnErr error
	for {
		var env wire.Envelope
		var ok bool
		select {
		case env, ok = <-c.events:
		case <-ctx.Done():
			return wire.TurnDone{}, fmt.Errorf("run %s: %w", id, ctx.Err())
		}
		if !ok {
			return wire.TurnDone{}, fmt.Errorf("run %s: %w", id, c.endErr())
		}
		mine := env.ID == id
		// Approval events carry no id: a turn waits on them. An error
		// answering another request sent meanwhile (an approval answer
		// the bridge refused) is shown too, but is not the turn's.
		otherErr := env.Type == wire.TypeError && env.Seq == 0
		if !mine && !wire.IsApproval(env.Type) && !otherErr {
			continue
		}
		if fn != nil {
			fn(env)
		}
		if !mine {
			continue
		}
		switch env.Type {
		case wire.TypeError:
			var werr wire.Error
			if err := env.Decode(&werr); err != nil {
				return wire.TurnDone{}, fmt.Errorf("run %s: %w", id, err)
			}
			if env.Seq == 0 {
				return wire.TurnDone{}, fmt.Errorf("run %s: %w", id, werr)
			}
			if turnErr == nil {
				turnErr = fmt.Errorf("run %s: %w", id, werr)
			}
		case wire.TypeTurnDone:
			var done wire.TurnDone
			if err := env.Decode(&done); err != nil {
				return wire.TurnDone{}, fmt.Errorf("run %s: %w", id, err)
			}
			return done, turnErr
		}
	}
}
