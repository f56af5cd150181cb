package chat

import (
	"context"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// SendMessage starts a turn: it sends a user_message with a fresh id and
// returns that id, which every event of the turn carries. It blocks like
// Send and is safe for concurrent use.
func (c *Conn) SendMessage(ctx context.Context, text string) (string, error) {
	id := c.newID("m")
	env := wire.MustNew(wire.TypeUserMessage, c.thread, id, wire.UserMessage{Text: text})
	if err := c.Send(ctx, env); err != nil {
		return "", err
	}
	return id, nil
}

// Interrupt asks the server to cancel the running turn, which then ends
// with turn_done "interrupted"; without a running turn it does nothing. It
// blocks like Send and is safe for concurrent use.
func (c *Conn) Interrupt(ctx context.Context) error {
	return c.Send(ctx, wire.Envelope{Type: wire.TypeInterrupt, Thread: c.thread, ID: c.newID("i")})
}

// Ping sends a protocol ping and waits for the pong with its id, the
// connection's end, or ctx's end; it returns the round trip time. Through
// a bridge this measures the whole path to the agent. An error answering
// the ping is returned as (a wrapped) wire.Error and is also delivered on
// Events. Safe for concurrent use.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	id := c.newID("p")
	waiter := make(chan error, 1)
	c.mu.Lock()
	c.pings[id] = waiter
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, id)
		c.mu.Unlock()
	}()
	start := time.Now()
	if err := c.Send(ctx, wire.Envelope{Type: wire.TypePing, Thread: c.thread, ID: id}); err != nil {
		return 0, fmt.Errorf("ping: %w", err)
	}
	select {
	case err := <-waiter:
		if err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		return time.Since(start), nil
	case <-c.readDone:
		return 0, fmt.Errorf("ping: %w", c.endErr())
	case <-ctx.Done():
		return 0, fmt.Errorf("ping: %w", ctx.Err())
	}
}
