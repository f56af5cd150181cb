package greet

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// ErrHeldGone is why Held.Claim sent nothing: the held connection had
// ended (the agent or its sandbox stopped). The caller may greet the agent
// anew.
var ErrHeldGone = errors.New("held agent connection ended before the claim")

// Held is an agent's connection greeted ahead of its claim and kept open
// until then: a pooled sandbox's, greeted under the id of the thread that
// will take it, so that the thread's claim is one round trip on it
// (Held.Claim) instead of a dial, a WebSocket handshake, a hello and a
// claim. A goroutine of its own reads the connection meanwhile, so the
// agent's pings are answered; anything else an unclaimed agent sends is
// dropped. It ends at the claimed answer (the connection is then the
// claimer's, nothing of it read ahead), when the connection fails, or at
// Close.
type Held struct {
	g        *Greeter
	conn     *websocket.Conn
	thread   string
	claiming atomic.Bool   // set before the claim is written: a claimed before it is refused
	done     chan struct{} // closed when the reader ended
	err      error         // why the reader ended (nil: claimed); read once done is closed
}

// Hold keeps conn, greeted for thread without a claim (Wait or Dial with
// claim false), open for a later Claim. The caller gives conn up to it.
func (g *Greeter) Hold(conn *websocket.Conn, thread string) *Held {
	h := &Held{g: g, conn: conn, thread: thread, done: make(chan struct{})}
	go h.read()
	return h
}

// Thread is the thread id the agent was greeted under: the claiming
// thread must have it.
func (h *Held) Thread() string { return h.thread }

func (h *Held) read() {
	defer close(h.done)
	h.err = readUntilClaimed(h.conn, h.claiming.Load)
}

// Claim hands the agent of the sandbox boxID its claim (its LLM proxy
// token) on the held connection and waits, at most HelloTimeout or until
// ctx ends, for its claimed; the connection is then the caller's. An error
// wrapping ErrHeldGone says nothing was sent (the connection had ended);
// any other says the claim may have reached the agent, which the caller
// must not hand to a thread. On an error the connection is closed.
func (h *Held) Claim(ctx context.Context, boxID string) (*websocket.Conn, error) {
	select {
	case <-h.done:
		h.conn.Close()
		return nil, fmt.Errorf("%w: %w", ErrHeldGone, h.err)
	default:
	}
	h.claiming.Store(true)
	if err := h.g.sendClaim(h.conn, boxID, h.thread); err != nil {
		h.Close()
		return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	timeout := time.NewTimer(HelloTimeout)
	defer timeout.Stop()
	select {
	case <-h.done:
	case <-ctx.Done():
		h.Close()
		return nil, fmt.Errorf("claim: %w", ctx.Err())
	case <-timeout.C:
		h.Close()
		return nil, fmt.Errorf("%w: no claimed within %v", errAgentAnswer, HelloTimeout)
	}
	if h.err != nil {
		h.conn.Close()
		return nil, fmt.Errorf("%w: %w", errAgentAnswer, h.err)
	}
	return h.conn, nil
}

// Close ends a connection no claim took (its pooled sandbox is being
// removed) and waits for its reader.
func (h *Held) Close() {
	_ = h.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "pooled"), time.Now().Add(time.Second))
	h.conn.Close()
	<-h.done
}
