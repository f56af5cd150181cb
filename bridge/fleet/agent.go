package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	// agentReadyTimeout bounds waiting for a new sandbox's agent to answer.
	agentReadyTimeout = 30 * time.Second
	// agentPollInterval is the pause between attempts to reach the agent.
	agentPollInterval = 20 * time.Millisecond
	// inspectEvery is how many failed attempts pass between asking the
	// engine whether the sandbox already exited.
	inspectEvery = 25
	// helloTimeout bounds waiting for the agent's hello and claimed.
	helloTimeout = 10 * time.Second
	// writeWait bounds writing one frame.
	writeWait = 10 * time.Second
	// agentSocket is the agent's socket in its folder; llmSocket the LLM
	// proxy's in the bridge folder (bridge/boxdir).
	agentSocket = "agent.sock"
	llmSocket   = "llm.sock"
)

// AgentSocket is the name of the agent's socket in its folder, for
// boxdir.Dirs.DialAgent.
const AgentSocket = agentSocket

// ReplaceTimeout bounds a member's replacement of its sandbox (Replace:
// the old one's removal, the new one's creation and its agent's hello).
const ReplaceTimeout = agentReadyTimeout + 2*cleanupTimeout

// errAgentAnswer marks an agent that answered, but not with hello: trying
// again will not help.
var errAgentAnswer = errors.New("agent refused hello")

// Greet polls the agent socket of b's current sandbox until the agent
// answers hello for thread threadID and takes its claim (see
// greeter.greet), the sandbox exits, agentReadyTimeout passes or ctx ends.
func (f *Fleet) Greet(ctx context.Context, b *Box, threadID string) (*websocket.Conn, error) {
	return f.greeter.wait(ctx, threadID, b.res, true)
}

// greeter greets the agents of the fleet's sandboxes: it dials each one's
// socket, exchanges hello, checks its posture and hands over its LLM
// token (claim). It keeps no state of its own; it runs on its caller's
// goroutine.
type greeter struct{ f *Fleet }

// wait is Greet on res; claim false greets without handing over the LLM
// token (a pooled sandbox no thread has taken yet, pool.go).
func (g greeter) wait(ctx context.Context, id string, res *resources, claim bool) (*websocket.Conn, error) {
	f := g.f
	ctx, cancel := context.WithTimeout(ctx, agentReadyTimeout)
	defer cancel()
	pol := f.cfg.Posture.ForRuntime(res.runtime)
	for attempt := 1; ; attempt++ {
		conn, err := g.greet(ctx, res, id, pol, claim)
		if err == nil {
			return conn, nil
		}
		// A non-socket under the agent socket's name was planted there (a
		// link to a host socket, say): waiting will not mend it.
		if errors.Is(err, errAgentAnswer) || errors.Is(err, boxdir.ErrNotSocket) {
			return nil, err
		}
		if attempt%inspectEvery == 0 {
			sb, ierr := f.cfg.Manager.Inspect(ctx, res.sandbox())
			if ierr == nil && !sb.Running {
				return nil, fmt.Errorf("sandbox exited with code %d before its agent was ready", sb.ExitCode)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent not ready: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(agentPollInterval):
		}
	}
}

// greet dials the agent's socket in res's folder (without trusting
// the name, boxdir.Dirs.DialAgent), exchanges hello, checks the agent's
// posture against pol and, when claim is set, hands the agent its LLM
// proxy token in a claim. The token never travels in the sandbox's
// environment, where its commands could read it (/proc/1/environ). The
// build the agent names is recorded in res (resources.build).
func (g greeter) greet(ctx context.Context, res *resources, id string, pol *PosturePolicy, claim bool) (*websocket.Conn, error) {
	f, dirs := g.f, res.dirs
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dirs.DialAgent(ctx, agentSocket)
		},
		HandshakeTimeout: helloTimeout,
	}
	conn, _, err := d.DialContext(ctx, "ws://agent"+wire.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("dial agent: %w", err)
	}
	hello := wire.MustNew(wire.TypeHello, id, "", wire.Hello{
		Version: wire.Version, Role: wire.RoleBridge, Software: f.cfg.Software, Thread: id,
	})
	if err := writeEnvelope(conn, hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send hello to agent: %w", err)
	}
	answer, err := readAgentHello(conn)
	if err != nil {
		conn.Close()
		var werr wire.Error
		if errors.As(err, &werr) {
			return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
		}
		return nil, fmt.Errorf("agent hello: %w", err)
	}
	if err := pol.Check(answer.Posture); err != nil {
		conn.Close()
		f.log.Warn("sandbox posture refused", "thread", id, "posture", answer.Posture, "err", err)
		return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	if claim {
		if err := g.claim(conn, dirs.ID(), id); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
		}
	}
	res.setBuild(buildOf(answer))
	return conn, nil
}

// claim sends the agent of the sandbox boxID its claim (its LLM proxy
// token) and waits (at most helloTimeout) for claimed, before anything
// else uses conn.
func (g greeter) claim(conn *websocket.Conn, boxID, threadID string) error {
	claim := wire.MustNew(wire.TypeClaim, threadID, "claim", wire.Claim{LLMToken: g.f.px.sandboxToken(boxID)})
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

// readAgentHello reads the agent's answer to the bridge's hello within
// helloTimeout: a wire.Error when the agent broke the protocol or answered
// with an error, another error when reading failed.
func readAgentHello(conn *websocket.Conn) (wire.Hello, error) {
	var hello wire.Hello
	if err := conn.SetReadDeadline(time.Now().Add(helloTimeout)); err != nil {
		return hello, err
	}
	defer conn.SetReadDeadline(time.Time{})
	_, r, err := conn.NextReader()
	if err != nil {
		return hello, fmt.Errorf("read hello: %w", err)
	}
	env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
	switch {
	case errors.Is(err, wire.ErrTooLarge):
		return hello, wire.Error{Code: wire.CodeTooLarge, Message: "hello over the size limit"}
	case err != nil:
		return hello, err
	case env.Type == wire.TypeError:
		var werr wire.Error
		if err := env.Decode(&werr); err != nil {
			return hello, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
		}
		return hello, werr
	case env.Type != wire.TypeHello:
		return hello, wire.Error{Code: wire.CodeBadMessage, Message: fmt.Sprintf("first message must be hello, not %q", env.Type)}
	}
	if err := env.Decode(&hello); err != nil {
		return hello, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	if hello.Version != wire.Version {
		return hello, wire.Error{Code: wire.CodeVersionMismatch,
			Message: fmt.Sprintf("this side speaks protocol version %d, not %d", wire.Version, hello.Version)}
	}
	return hello, nil
}

// writeEnvelope writes one frame with the write deadline.
func writeEnvelope(conn *websocket.Conn, env wire.Envelope) error {
	if err := conn.SetWriteDeadline(time.Now().Add(writeWait)); err != nil {
		return err
	}
	return conn.WriteJSON(env)
}
