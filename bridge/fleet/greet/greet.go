package greet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/internal/peerhello"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

const (
	// ReadyTimeout bounds waiting for a new sandbox's agent to answer
	// (Wait).
	ReadyTimeout = 30 * time.Second
	// HelloTimeout bounds waiting for the agent's hello and claimed.
	HelloTimeout = 10 * time.Second
	// WriteWait bounds writing one frame.
	WriteWait = 10 * time.Second
	// AgentSocket is the agent's socket in its folder (bridge/boxdir).
	AgentSocket = "agent.sock"
	// agentPollInterval is the pause between attempts to reach the agent
	// while nothing is made in its folder.
	agentPollInterval = 20 * time.Millisecond
	// quickRetries attempts quickRetry apart follow a name made in the
	// agent folder: its socket exists a moment before it listens.
	quickRetries = 10
	quickRetry   = time.Millisecond
	// inspectEvery is how often the engine is asked whether a sandbox
	// whose agent does not answer already exited.
	inspectEvery = 500 * time.Millisecond
)

// errAgentAnswer marks an agent that answered, but not with hello: trying
// again will not help.
var errAgentAnswer = errors.New("agent refused hello")

// Inspector tells whether a sandbox still runs: the engine
// (sandbox.Manager), asked while an agent does not answer.
type Inspector interface {
	Inspect(ctx context.Context, id string) (sandbox.Sandbox, error)
}

// Config configures a Greeter.
type Config struct {
	// Software names the bridge in its hello to agents.
	Software string
	// Engine is asked whether a sandbox whose agent does not answer has
	// exited. Required.
	Engine Inspector
	// Posture is what each agent's hello must report, under the
	// sandbox's runtime (PosturePolicy.ForRuntime); nil checks nothing.
	Posture *PosturePolicy
	// Token returns the LLM proxy token a claim hands the agent of the
	// sandbox whose folder is named box. Required for claims.
	Token func(box string) string
	// Logger receives refused postures; nil discards them.
	Logger *slog.Logger
}

// Greeter greets the agents of a fleet's sandboxes.
type Greeter struct {
	cfg Config
	log *slog.Logger
}

// New returns a Greeter for cfg.
func New(cfg Config) *Greeter {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Greeter{cfg: cfg, log: log}
}

// Target is the sandbox to greet: its host folders, its OCI runtime ("":
// the engine's default; its posture is checked under it) and its current
// sandbox id, read when the engine is asked (it changes when the sandbox
// is replaced).
type Target struct {
	Dirs      boxdir.Dirs
	Runtime   string
	SandboxID func() string
}

// AgentBuild is what a sandbox's agent says of its build in its hello.
type AgentBuild struct {
	// Version is the part of its software name after "boxwire-agent/"
	// (all of it for another name).
	Version string
	// Hash is the SHA-256 of its binary, "sha256:<hex>" (wire.Hello.AgentHash).
	Hash string
	// Posture is what it found about its confinement (wire.Hello.Posture,
	// checked by then); nil when it reported none. Shared: not to be
	// changed.
	Posture *wire.Posture
	// Instance is the agent process's random id (wire.Hello.Instance): a
	// new one each time the agent starts, so a thread whose stored agent
	// cursor names it is talking to the agent that has its conversation.
	Instance string
}

// buildOf reads an agent's hello.
func buildOf(h wire.Hello) AgentBuild {
	v, ok := strings.CutPrefix(h.Software, "boxwire-agent/")
	if !ok {
		v = h.Software
	}
	return AgentBuild{Version: v, Hash: h.AgentHash, Posture: h.Posture, Instance: h.Instance}
}

// Wait dials the agent socket of t until the agent answers hello for
// thread id and, when claim is set, takes its claim (see Dial), the
// sandbox exits, ReadyTimeout passes or ctx ends. It tries again when a
// name is made in the agent folder (folderWatch: the socket appeared),
// quickly a few times after that (the socket's name comes a moment before
// it listens), and every agentPollInterval besides. claim false greets
// without handing over the LLM token (a pooled sandbox no thread has
// taken yet).
func (g *Greeter) Wait(ctx context.Context, t Target, id string, claim bool) (*websocket.Conn, AgentBuild, error) {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	watch := watchFolder(t.Dirs.Agent) // before the first dial: a socket made after it is seen
	defer watch.close()
	inspected, quick := time.Now(), 0
	for {
		conn, build, err := g.Dial(ctx, t, id, claim)
		if err == nil {
			return conn, build, nil
		}
		// A non-socket under the agent socket's name was planted there (a
		// link to a host socket, say): waiting will not mend it.
		if errors.Is(err, errAgentAnswer) || errors.Is(err, boxdir.ErrNotSocket) {
			return nil, AgentBuild{}, err
		}
		if time.Since(inspected) >= inspectEvery {
			inspected = time.Now()
			sb, ierr := g.cfg.Engine.Inspect(ctx, t.SandboxID())
			if ierr == nil && !sb.Running {
				return nil, AgentBuild{}, fmt.Errorf("sandbox exited with code %d before its agent was ready", sb.ExitCode)
			}
		}
		pause := agentPollInterval
		if quick > 0 {
			pause, quick = quickRetry, quick-1
		}
		if watch.wait(ctx, pause) {
			quick = quickRetries
		}
		if ctx.Err() != nil {
			return nil, AgentBuild{}, fmt.Errorf("agent not ready: %w (last attempt: %v)", ctx.Err(), err)
		}
	}
}

// agentWriteBuffers are the write buffers of agent connections: an idle
// connection (most of a bridge's) holds none, each message takes one and
// gives it back once written.
var agentWriteBuffers = &sync.Pool{}

// Dial dials the agent's socket in t's folder once (without trusting the
// name, boxdir.Dirs.DialAgent), exchanges hello for thread id, checks the
// agent's posture under t's runtime and, when claim is set, hands the
// agent its LLM proxy token in a claim. The token never travels in the
// sandbox's environment, where its commands could read it
// (/proc/1/environ). It returns the build the agent named.
func (g *Greeter) Dial(ctx context.Context, t Target, id string, claim bool) (*websocket.Conn, AgentBuild, error) {
	conn, err := g.open(ctx, t, id)
	if err != nil {
		return nil, AgentBuild{}, err
	}
	build, err := g.answer(conn, t, id)
	if err == nil && claim {
		err = g.claim(conn, t.Dirs.ID(), id)
	}
	if err != nil {
		conn.Close()
		return nil, AgentBuild{}, err
	}
	return conn, build, nil
}

// Claim greets for thread id and claims the agent of a sandbox that was
// greeted before (a pooled one) and named greeted in its hello, in one
// round trip instead of two: the claim follows the hello at once, not
// after its answer, because the posture the token is handed to was
// checked in that earlier hello. The answer must come from the same agent
// process (greeted.Instance) and still pass the posture check; an agent
// that started again since is refused (errAgentAnswer), and the token it
// was sent is of a sandbox the caller then removes. Without an earlier
// instance to compare, Claim is Dial.
func (g *Greeter) Claim(ctx context.Context, t Target, id string, greeted AgentBuild) (*websocket.Conn, AgentBuild, error) {
	if greeted.Instance == "" {
		return g.Dial(ctx, t, id, true)
	}
	conn, err := g.open(ctx, t, id)
	if err != nil {
		return nil, AgentBuild{}, err
	}
	build, err := g.pipelinedClaim(conn, t, id, greeted.Instance)
	if err != nil {
		conn.Close()
		return nil, AgentBuild{}, err
	}
	return conn, build, nil
}

// pipelinedClaim sends the claim right behind the hello open sent, then
// reads and checks the hello answer (the same instance, the posture) and
// the claimed.
func (g *Greeter) pipelinedClaim(conn *websocket.Conn, t Target, id, instance string) (AgentBuild, error) {
	if err := g.sendClaim(conn, t.Dirs.ID(), id); err != nil {
		return AgentBuild{}, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	build, err := g.answer(conn, t, id)
	if err != nil {
		return AgentBuild{}, err
	}
	if build.Instance != instance {
		return AgentBuild{}, fmt.Errorf("%w: the agent started again since it was greeted (instance %q, was %q)", errAgentAnswer, build.Instance, instance)
	}
	if err := g.awaitClaimed(conn); err != nil {
		return AgentBuild{}, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	return build, nil
}

// open dials the agent's socket in t's folder (without trusting the name,
// boxdir.Dirs.DialAgent) and sends its hello for thread id.
func (g *Greeter) open(ctx context.Context, t Target, id string) (*websocket.Conn, error) {
	dirs := t.Dirs
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			nc, err := dirs.DialAgent(ctx, AgentSocket)
			if err != nil {
				return nil, err
			}
			return wire.NewTryConn(nc), nil // the link's requests can go out on the sender's goroutine (agentlink.Link.Send)
		},
		HandshakeTimeout: HelloTimeout,
		ReadBufferSize:   wire.ReadBufferSize,
		WriteBufferPool:  agentWriteBuffers,
	}
	conn, _, err := d.DialContext(ctx, "ws://agent"+wire.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("dial agent: %w", err)
	}
	hello := wire.MustNew(wire.TypeHello, id, "", wire.Hello{
		Version: wire.Version, Role: wire.RoleBridge, Software: g.cfg.Software, Thread: id,
		HostTools: true, // it answers host_tools_list (bridge/server/hosttools.go)
	})
	if err := writeEnvelope(conn, hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send hello to agent: %w", err)
	}
	return conn, nil
}

// answer reads the agent's answer to the hello and checks its posture
// under t's runtime.
func (g *Greeter) answer(conn *websocket.Conn, t Target, id string) (AgentBuild, error) {
	answer, _, err := peerhello.Read(conn, HelloTimeout)
	if err != nil {
		var werr wire.Error
		if errors.As(err, &werr) {
			return AgentBuild{}, fmt.Errorf("%w: %w", errAgentAnswer, err)
		}
		return AgentBuild{}, fmt.Errorf("agent hello: %w", err)
	}
	if err := g.cfg.Posture.ForRuntime(t.Runtime).Check(answer.Posture); err != nil {
		g.log.Warn("sandbox posture refused", "thread", id, "posture", answer.Posture, "err", err)
		return AgentBuild{}, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	return buildOf(answer), nil
}

// claim sends the agent of the sandbox boxID its claim (its LLM proxy
// token) and waits (at most HelloTimeout) for claimed, before anything
// else uses conn. Its failures are errAgentAnswer.
func (g *Greeter) claim(conn *websocket.Conn, boxID, threadID string) error {
	err := g.sendClaim(conn, boxID, threadID)
	if err == nil {
		err = g.awaitClaimed(conn)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	return nil
}

// sendClaim sends the agent of the sandbox boxID its claim.
func (g *Greeter) sendClaim(conn *websocket.Conn, boxID, threadID string) error {
	claim := wire.MustNew(wire.TypeClaim, threadID, "claim", wire.Claim{LLMToken: g.cfg.Token(boxID)})
	if err := writeEnvelope(conn, claim); err != nil {
		return fmt.Errorf("send claim: %w", err)
	}
	return nil
}

// awaitClaimed reads (at most HelloTimeout) until the agent's claimed.
func (g *Greeter) awaitClaimed(conn *websocket.Conn) error {
	if err := conn.SetReadDeadline(time.Now().Add(HelloTimeout)); err != nil {
		return err
	}
	defer conn.SetReadDeadline(time.Time{})
	return readUntilClaimed(conn, nil)
}

// readUntilClaimed reads conn's messages until the agent's claimed (nil)
// or its refusal, dropping others (an agent sends none of its own before
// its claim). sent, when not nil, reports whether the claim was sent yet:
// a claimed before it is the agent's error, an error message before it
// is dropped.
func readUntilClaimed(conn *websocket.Conn, sent func() bool) error {
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return fmt.Errorf("read claimed: %w", err)
		}
		env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
		claimSent := sent == nil || sent()
		switch {
		case err != nil:
			return fmt.Errorf("read claimed: %w", err)
		case env.Type == wire.TypeClaimed && !claimSent:
			return errors.New("agent answered claimed before any claim")
		case env.Type == wire.TypeClaimed:
			return nil
		case env.Type == wire.TypeError && claimSent:
			var werr wire.Error
			_ = env.Decode(&werr)
			return fmt.Errorf("agent refused the claim: %w", werr)
		}
	}
}

// writeEnvelope writes one frame with the write deadline.
func writeEnvelope(conn *websocket.Conn, env wire.Envelope) error {
	if err := conn.SetWriteDeadline(time.Now().Add(WriteWait)); err != nil {
		return err
	}
	return conn.WriteJSON(env)
}
