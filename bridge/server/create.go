package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
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
	// cleanupTimeout bounds removing what a failed creation left.
	cleanupTimeout = 30 * time.Second
	// agentSocket is the agent's socket in its folder; llmSocket the LLM
	// proxy's in the bridge folder (bridge/boxdir).
	agentSocket = "agent.sock"
	llmSocket   = "llm.sock"
)

// resources are what a thread owns outside the process. remove deletes
// them; fields left empty were never created. Only sandboxID changes after
// creation (a replacement, replace.go): read and set it with sandbox and
// setSandbox, which are safe for concurrent use.
type resources struct {
	dirs      boxdir.Dirs // the sandbox's host folders; zero when not made
	proxy     *llmproxy.Listener
	egress    *egress.Listener
	volume    string
	runtime   string // the sandbox's OCI runtime; its posture is checked under it
	mu        sync.Mutex
	sandboxID string // guarded by mu once the resources are shared
}

// sandbox is the id of the current sandbox ("" before it was created).
func (r *resources) sandbox() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sandboxID
}

// setSandbox records the current sandbox.
func (r *resources) setSandbox(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxID = id
}

// keepingVolume is r without its workspace volume: what to remove when a
// suspended thread (suspend.go) or another thread still owns the volume.
func (r *resources) keepingVolume() *resources {
	return &resources{dirs: r.dirs, proxy: r.proxy, egress: r.egress, sandboxID: r.sandbox()}
}

// remove deletes the sandbox, its workspace volume, the proxies and the
// host folders, in that order, and reports every failure.
func (r *resources) remove(ctx context.Context, mgr sandbox.Manager) error {
	var errs []error
	if id := r.sandbox(); id != "" {
		if err := mgr.Remove(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", id, err))
		}
	}
	if r.volume != "" {
		if err := mgr.RemoveVolume(ctx, r.volume); err != nil {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", r.volume, err))
		}
	}
	if err := r.closeProxies(); err != nil {
		errs = append(errs, err)
	}
	if r.dirs.Bridge != "" {
		if err := r.dirs.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox folders: %w", err))
		}
	}
	return errors.Join(errs...)
}

// closeProxies stops serving the sandbox's LLM and egress proxies (the
// sockets in its folder) and reports every failure.
func (r *resources) closeProxies() error {
	var errs []error
	if r.proxy != nil {
		if err := r.proxy.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close llm proxy: %w", err))
		}
	}
	if r.egress != nil {
		if err := r.egress.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close egress proxy: %w", err))
		}
	}
	return errors.Join(errs...)
}

// createThread makes a new thread for req: it validates req, finds or
// creates the sandbox (see acquireBox), greets its agent and registers the
// thread. It blocks until the agent answers (at most agentReadyTimeout) or
// ctx ends. On failure a sandbox made for this thread alone is removed.
func (s *Server) createThread(ctx context.Context, req wire.CreateThread) (*thread, error) {
	o, err := s.boxOptionsFor(req)
	if err != nil {
		return nil, err
	}
	pol, err := s.threadPolicy(req) // approvals_egress.go
	if err != nil {
		return nil, err
	}
	id, err := newThreadID()
	if err != nil {
		return nil, err
	}
	log := s.log.With("thread", id)
	if o.scope == wire.ScopeAssistant { // suspend.go: take a suspended assistant's workspace back
		o.boxID = s.suspendedBox(ctx, o.assistant)
	}
	b, conn := s.claimPooled(ctx, o, id, log) // pool.go: nil when none is ready
	if b == nil {
		if b, err = s.acquireBox(ctx, o, id); err != nil {
			return nil, err
		}
		conn, err = s.waitAgent(ctx, id, b.res)
	}
	defer s.joined(b) // box.go: the reaper left b alone while the thread started
	if err == nil {
		t := newThread(s, id, conn, b.res, 0, log)
		t.gate.set(pol)
		s.setLinked(b, id, b.res.sandbox()) // lifecycle.go
		// Under the box's lock, so a PATCH of the sandbox's egress rules
		// (egress_update.go) finds this thread registered with the rules
		// it stored, or runs after.
		unlockBox := s.life.Lock("box:" + b.id)
		rec := ThreadRecord{ID: id, Box: b.id, Scope: b.scope, Assistant: b.assistant,
			Image: b.image, Runtime: b.runtime, Created: time.Now().UTC(), IdleTTL: b.idleTTL,
			Egress: s.boxEgress(b), Policy: req.Policy} // egress_thread.go
		err = s.register(ctx, t, b, rec)
		unlockBox()
		if err == nil {
			return t, nil
		}
		t.shutdown(wire.Envelope{})
	}
	if b.scope == wire.ScopeThread {
		s.dropBox(ctx, b, log)
	}
	return nil, err
}

// dropBox removes b from the server and removes its resources.
func (s *Server) dropBox(ctx context.Context, b *box, log *slog.Logger) {
	s.forgetBox(b)
	s.removeResources(ctx, b.res, log)
}

// forgetBox takes b out of the server's boxes and marks it gone.
func (s *Server) forgetBox(b *box) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.boxes[b.key] == b {
		delete(s.boxes, b.key)
	}
	b.gone = true
}

func newThreadID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("thread id: %w", err)
	}
	return "t_" + hex.EncodeToString(b), nil
}

// spec says how to run b's sandbox. It carries no key: the agent reaches
// the model through the proxy socket.
func (s *Server) spec(b *box) sandbox.Spec {
	env := []string{
		"BOXWIRE_LISTEN=unix:" + sandbox.AgentMount + "/" + agentSocket,
		"BOXWIRE_LLM_SOCKET=" + sandbox.SocketMount + "/" + llmSocket,
		"OPENAI_BASE_URL=http://boxwire-llm/v1",
	}
	env = append(env, s.securityEnv()...) // no secret: the LLM token comes with the claim (greetAgent)
	if s.cfg.Model != "" {
		env = append(env, "BOXWIRE_MODEL="+s.cfg.Model)
	}
	return sandbox.Spec{
		Name:            "boxwire-" + b.id,
		Image:           b.image,
		Runtime:         b.runtime,
		Env:             env,
		Labels:          s.labels(b),
		SocketDir:       b.res.dirs.Bridge,
		AgentDir:        b.res.dirs.Agent,
		WorkspaceVolume: "boxwire-ws-" + b.id,
		User:            fmt.Sprintf("%d:%d", s.cfg.SandboxUID, s.cfg.SandboxGID),
	}
}

// errAgentAnswer marks an agent that answered, but not with hello: trying
// again will not help.
var errAgentAnswer = errors.New("agent refused hello")

// waitAgent polls the agent socket until the agent answers hello (and
// takes its claim, see greetAgent), the sandbox exits, agentReadyTimeout
// passes or ctx ends.
func (s *Server) waitAgent(ctx context.Context, id string, res *resources) (*websocket.Conn, error) {
	return s.waitAgentClaim(ctx, id, res, true)
}

// waitAgentClaim is waitAgent; claim false greets without handing over
// the LLM token (a pooled sandbox no thread has taken yet, pool.go).
func (s *Server) waitAgentClaim(ctx context.Context, id string, res *resources, claim bool) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, agentReadyTimeout)
	defer cancel()
	pol := s.cfg.Posture.ForRuntime(res.runtime)
	for attempt := 1; ; attempt++ {
		conn, err := s.greetAgent(ctx, res.dirs, id, pol, claim)
		if err == nil {
			return conn, nil
		}
		// A non-socket under the agent socket's name was planted there (a
		// link to a host socket, say): waiting will not mend it.
		if errors.Is(err, errAgentAnswer) || errors.Is(err, boxdir.ErrNotSocket) {
			return nil, err
		}
		if attempt%inspectEvery == 0 {
			sb, ierr := s.cfg.Manager.Inspect(ctx, res.sandbox())
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

// greetAgent dials the agent's socket in its folder (without trusting
// the name, boxdir.Dirs.DialAgent), exchanges hello, checks the agent's
// posture against pol and, when claim is set, hands the agent its LLM
// proxy token in a claim. The token never travels in the sandbox's
// environment, where its commands could read it (/proc/1/environ).
func (s *Server) greetAgent(ctx context.Context, dirs boxdir.Dirs, id string, pol *PosturePolicy, claim bool) (*websocket.Conn, error) {
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
		Version: wire.Version, Role: wire.RoleBridge, Software: s.cfg.Software, Thread: id,
	})
	if err := writeEnvelope(conn, hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send hello to agent: %w", err)
	}
	answer, _, err := readHello(conn)
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
		s.log.Warn("sandbox posture refused", "thread", id, "posture", answer.Posture, "err", err)
		return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
	}
	if claim {
		if err := s.sendClaim(conn, dirs.ID(), id); err != nil { // pool_adopt.go
			conn.Close()
			return nil, fmt.Errorf("%w: %w", errAgentAnswer, err)
		}
	}
	return conn, nil
}
