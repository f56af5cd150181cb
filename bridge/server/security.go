package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// egressSocket is the egress proxy's socket name in a sandbox's folder.
const egressSocket = "egress.sock"

// hardFrameBytes is the largest frame a client may send at all: a frame
// over wire.MaxMessageBytes but under this is drained and answered
// too_large; a larger one closes the connection with 1009 (message too
// big) without being read, and the bridge carries on.
const hardFrameBytes = 16 << 20

// refuseBinary drains a binary frame that is not a terminal frame and
// answers it with a bad_message error; the connection stays.
func (c *client) refuseBinary(t *thread, r io.Reader) {
	_, _ = io.Copy(io.Discard, r)
	c.enqueue(wire.ErrorEnvelope(t.id, "", wire.CodeBadMessage,
		"binary frames carry terminal data only; send requests as JSON text frames"))
}

// PosturePolicy is what a sandbox's agent must report in its hello (see
// wire.Posture) for the bridge to use it; a weaker one is refused with
// sandbox_unavailable and the sandbox removed.
type PosturePolicy struct {
	// NonRoot requires uid and gid other than 0.
	NonRoot bool
	// NoCapabilities requires empty effective and bounding sets.
	NoCapabilities bool
	// NoNewPrivs requires the no_new_privs bit.
	NoNewPrivs bool
	// Seccomp requires a seccomp filter (mode 2) under runtimes that apply
	// the engine's seccomp option; ForRuntime drops it for gVisor's runsc,
	// which ignores that option and filters system calls in its own kernel.
	Seccomp bool
	// ReadOnlyRoot requires a read-only root filesystem.
	ReadOnlyRoot bool
	// Limits requires pids and memory limits.
	Limits bool
}

// StrictPosture requires everything the bridge configures.
func StrictPosture() *PosturePolicy {
	return &PosturePolicy{NonRoot: true, NoCapabilities: true, NoNewPrivs: true, Seccomp: true, ReadOnlyRoot: true, Limits: true}
}

// ForRuntime returns the policy for a sandbox run by the OCI runtime rt
// ("" is the engine's default): pol itself, or for "runsc" a copy that
// requires only what gVisor's kernel can show from inside. gVisor ignores
// the engine's seccomp option (it filters in its own kernel), reports
// NoNewPrivs as 0, and keeps the container's cgroup limits on the host,
// outside its view; those are applied by the engine all the same. Each
// sandbox is checked under its own runtime, so a thread that asks for runsc
// on a runc bridge is not refused for what runsc cannot show, and a runc
// thread on a runsc bridge still needs all of it. A nil policy stays nil.
func (pol *PosturePolicy) ForRuntime(rt string) *PosturePolicy {
	if pol == nil || rt != "runsc" {
		return pol
	}
	p := *pol
	p.Seccomp, p.NoNewPrivs, p.Limits = false, false, false
	return &p
}

// Check returns nil if p meets the policy, else a wire.Error of code
// sandbox_unavailable naming every shortfall. A nil policy accepts all.
func (pol *PosturePolicy) Check(p *wire.Posture) error {
	if pol == nil {
		return nil
	}
	if p == nil {
		return wire.Error{Code: wire.CodeSandboxUnavailable, Message: "sandbox refused: its agent reported no posture"}
	}
	var weak []string
	const none = "0000000000000000"
	checks := []struct {
		on, ok bool
		what   string
	}{
		{pol.NonRoot, p.UID != 0 && p.GID != 0, fmt.Sprintf("runs as uid %d gid %d", p.UID, p.GID)},
		{pol.NoCapabilities, p.CapEff == none && p.CapBnd == none, fmt.Sprintf("has capabilities (CapEff %s, CapBnd %s)", p.CapEff, p.CapBnd)},
		{pol.NoNewPrivs, p.NoNewPrivs, "lacks no_new_privs"},
		{pol.Seccomp, p.Seccomp == 2, fmt.Sprintf("seccomp mode %d, not 2", p.Seccomp)},
		{pol.ReadOnlyRoot, p.ReadOnlyRoot, "root filesystem is writable"},
		{pol.Limits, p.PidsMax > 0 && p.MemoryMaxBytes > 0, fmt.Sprintf("limits missing (pids %d, memory %d)", p.PidsMax, p.MemoryMaxBytes)},
	}
	for _, c := range checks {
		if c.on && !c.ok {
			weak = append(weak, c.what)
		}
	}
	if len(weak) == 0 {
		return nil
	}
	return wire.Error{Code: wire.CodeSandboxUnavailable,
		Message: "sandbox refused: its posture is weaker than required: " + strings.Join(weak, "; ")}
}

// sandboxToken is the LLM proxy token of the sandbox with folder name id:
// an HMAC of id under the bridge's client token, so it is stable across
// bridge restarts (adopted sandboxes keep theirs), unguessable, and says
// nothing about the client token. Each proxy accepts only its own.
func (s *Server) sandboxToken(id string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.Token))
	m.Write([]byte("boxwire llm proxy token\x00" + id))
	return hex.EncodeToString(m.Sum(nil))
}

// securityEnv is the sandbox environment for the proxies: the egress
// socket when egress is configured, and the CA. It holds no secret: the
// LLM token is handed to the agent in its claim.
func (s *Server) securityEnv() []string {
	var env []string
	if s.egressOn() { // approvals_egress.go: allowlist, or credentials / ask in the policy
		env = append(env, "BOXWIRE_EGRESS_SOCKET="+sandbox.SocketMount+"/"+egressSocket)
	}
	return append(env, s.approvalEnv()...)
}

// securedLLM is the LLM proxy config of the sandbox id: its token, and
// its usage and refusals published to its threads.
func (s *Server) securedLLM(cfg llmproxy.Config, id string) llmproxy.Config {
	cfg.Token = s.sandboxToken(id)
	cfg.OnUsage = func(r llmproxy.UsageReport) {
		if !s.cfg.UsageEvents {
			return // the proxy logs every call
		}
		s.publishToBox(id, wire.MustNew(wire.TypeUsage, "", "", wire.UsageReport{
			Model: r.Model, Call: wire.Usage(r.Call), Total: wire.Usage(r.Total),
			Requests: r.Requests, TokenBudget: r.TokenBudget,
		}))
	}
	cfg.OnRefused = func(r llmproxy.Refusal) {
		code := wire.CodeLLM
		if r.Budget {
			code = wire.CodeBudgetExceeded
		}
		s.publishToBox(id, wire.ErrorEnvelope("", "", code, "%s", r.Reason))
	}
	return cfg
}

// serveEgress serves the egress proxy in dir when egress is configured;
// it returns nil, nil when it is not. The proxy decides with the bridge's
// allowlist and policy and the sandbox's own thread rules, looked up at
// each request (egress_thread.go).
func (s *Server) serveEgress(dirs boxdir.Dirs, log *slog.Logger) (*egress.Listener, error) {
	if !s.egressOn() {
		return nil, nil
	}
	rules, err := egress.ParseRules(s.cfg.Egress)
	if err != nil {
		return nil, err
	}
	id := dirs.ID()
	ecfg := egress.Config{Rules: rules, Logger: log.With("component", "egress"),
		OnDecision: func(d egress.Decision) {
			s.publishToBox(id, wire.MustNew(wire.TypeEgress, "", "", wire.EgressDecision{
				Method: d.Method, Host: d.Host, Port: d.Port, Allowed: d.Allowed, Rule: d.Rule, Reason: d.Reason,
			}))
		}}
	if err := s.egressApprovals(&ecfg, dirs); err != nil { // approvals_egress.go
		return nil, err
	}
	ecfg.Check = s.withThreadRules(id, ecfg.Check) // egress_thread.go
	ln, err := dirs.Listen(egressSocket)
	if err != nil {
		return nil, err
	}
	return egress.New(ecfg).Serve(ln), nil
}

// publishToBox publishes env as an event of every thread of the sandbox
// whose id is id. It does not block on clients.
func (s *Server) publishToBox(id string, env wire.Envelope) {
	var threads []*thread
	s.mu.Lock()
	for _, b := range s.boxes {
		if b.id == id {
			for _, t := range b.threads {
				threads = append(threads, t)
			}
		}
	}
	s.mu.Unlock()
	for _, t := range threads {
		e := env
		e.Thread = t.id
		t.publish(e)
	}
}
