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
	id := c.NewID("m")
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
	return c.Send(ctx, wire.Envelope{Type: wire.TypeInterrupt, Thread: c.thread, ID: c.NewID("i")})
}

// Request sends env as a request and waits for the message answering it:
// the first message without a seq that carries env's id. An empty env.ID
// is set to a fresh id (NewID("q")), an empty env.Thread to Thread(). It
// blocks until the answer arrives, the connection ends or ctx ends, and
// returns the answer; an error answer is returned with an error wrapping
// its wire.Error (errors.As gives the code). The Receiver, if any, sees
// the answer before Request returns; the answer does not go on to Events.
// Safe for concurrent use; ids must not be in use by another Request.
func (c *Conn) Request(ctx context.Context, env wire.Envelope) (wire.Envelope, error) {
	if env.ID == "" {
		env.ID = c.NewID("q")
	}
	if env.Thread == "" {
		env.Thread = c.thread
	}
	waiter := make(chan wire.Envelope, 1)
	c.mu.Lock()
	c.pending[env.ID] = waiter
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, env.ID)
		c.mu.Unlock()
	}()
	if err := c.Send(ctx, env); err != nil {
		return wire.Envelope{}, fmt.Errorf("%s: %w", env.Type, err)
	}
	select {
	case reply := <-waiter:
		if reply.Type != wire.TypeError {
			return reply, nil
		}
		var werr wire.Error
		if err := reply.Decode(&werr); err != nil {
			return reply, fmt.Errorf("%s: %w", env.Type, err)
		}
		return reply, fmt.Errorf("%s: %w", env.Type, werr)
	case <-c.readDone:
		return wire.Envelope{}, fmt.Errorf("%s: %w", env.Type, c.endErr())
	case <-ctx.Done():
		return wire.Envelope{}, fmt.Errorf("%s: %w", env.Type, ctx.Err())
	}
}

// Ping sends a protocol ping and waits for the pong with its id, the
// connection's end, or ctx's end; it returns the round trip time. Through
// a bridge this measures the whole path to the agent. An error answering
// the ping is returned as (a wrapped) wire.Error. Safe for concurrent use.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Request(ctx, wire.Envelope{Type: wire.TypePing, ID: c.NewID("p")}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
