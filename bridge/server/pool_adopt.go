package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// errPoolUnclaimed is why Reconcile removes a pooled sandbox of an earlier
// run that no thread took: it holds nothing of anyone.
var errPoolUnclaimed = errors.New("pooled sandbox no thread took")

// adoptPooled prepares b, a pooled sandbox an earlier run left, for
// adoption: it is adopted only when the store has a thread for its box
// (the thread took it). b then takes that thread's box key and the
// thread's own idle TTL, which the sandbox's labels, written before the
// claim, cannot say. It blocks for one store read.
func (s *Server) adoptPooled(ctx context.Context, b *box) error {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("list stored threads: %w", err)
	}
	for _, r := range recs {
		if r.Box != b.id || r.Scope != wire.ScopeThread {
			continue
		}
		b.thread = r.ID
		b.key = boxKey(wire.ScopeThread, r.ID)
		if r.IdleTTL > 0 {
			b.idleTTL = r.IdleTTL
		}
		return nil
	}
	return errPoolUnclaimed
}

// sendClaim sends the agent of the sandbox boxID its claim (its LLM proxy
// token) and waits (at most helloTimeout) for claimed, before anything
// else uses conn.
func (s *Server) sendClaim(conn *websocket.Conn, boxID, threadID string) error {
	claim := wire.MustNew(wire.TypeClaim, threadID, "claim", wire.Claim{LLMToken: s.sandboxToken(boxID)})
	if err := writeEnvelope(conn, claim); err != nil {
		return fmt.Errorf("send claim: %w", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(helloTimeout)); err != nil {
		return err
	}
	defer conn.SetReadDeadline(time.Time{})
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return fmt.Errorf("read claimed: %w", err)
		}
		env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
		switch {
		case err != nil:
			return fmt.Errorf("read claimed: %w", err)
		case env.Type == wire.TypeClaimed:
			return nil
		case env.Type == wire.TypeError:
			var werr wire.Error
			_ = env.Decode(&werr)
			return fmt.Errorf("agent refused the claim: %w", werr)
		}
		// an event of the agent's own (none is expected before the claim)
	}
}
