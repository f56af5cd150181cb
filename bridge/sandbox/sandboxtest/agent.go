package sandboxtest

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// AgentSocket is the agent's socket in its folder, as the real agent
// names it (fleet.AgentSocket).
const AgentSocket = "agent.sock"

// Agent is a fake sandbox agent: it answers a bridge's hello (software
// "fake-agent") and takes a claim as the real agent does, keeping the LLM
// token and answering claimed; answer, when set, answers every other
// message with the envelopes it returns, in order. Stop ends it. It is
// safe for concurrent use.
type Agent struct {
	answer func(env wire.Envelope) []wire.Envelope
	srv    *http.Server
	done   chan struct{} // closed when srv.Serve returned
	once   sync.Once

	mu     sync.Mutex
	conns  map[*websocket.Conn]struct{}
	tokens []string // the LLM tokens of the claims, oldest first
	wg     sync.WaitGroup
	hold   <-chan struct{} // hello answers wait until it closes (HoldHellos)
}

// HoldHellos makes the agent answer hellos only once hold is closed (or
// the agent stops): a bridge's greeting of it waits meanwhile.
func (a *Agent) HoldHellos(hold <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold = hold
}

// StartAgent serves a fake agent on AgentSocket in agentDir. answer (nil:
// none) is called on the connection's reader goroutine.
func StartAgent(agentDir string, answer func(env wire.Envelope) []wire.Envelope) (*Agent, error) {
	ln, err := net.Listen("unix", filepath.Join(agentDir, AgentSocket))
	if err != nil {
		return nil, fmt.Errorf("fake agent listen: %w", err)
	}
	a := &Agent{answer: answer, done: make(chan struct{}), conns: map[*websocket.Conn]struct{}{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go func() { // waited for by Stop
		defer close(a.done)
		_ = a.srv.Serve(ln)
	}()
	return a, nil
}

// Stop closes the listener and every connection and waits for their
// handlers. It is idempotent.
func (a *Agent) Stop() {
	a.once.Do(func() {
		_ = a.srv.Close()
		<-a.done
		a.mu.Lock()
		for c := range a.conns {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
}

// Claims returns the LLM tokens the agent was handed, oldest first.
func (a *Agent) Claims() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.tokens...)
}

// Token is the LLM token of the newest claim ("" before one).
func (a *Agent) Token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.tokens) == 0 {
		return ""
	}
	return a.tokens[len(a.tokens)-1]
}

// Detach closes the agent's connections (the sandbox goes on running) and
// then runs during, which may make events while no bridge is attached. A
// bridge that greets the agent again meanwhile waits (serve registers its
// connection under the same lock) until during returns.
func (a *Agent) Detach(during func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.conns {
		c.Close()
		delete(a.conns, c)
	}
	during()
}

// Posture is what every fake agent reports of its confinement in its
// hello: what a hardened sandbox shows (docs/security.md).
var Posture = wire.Posture{UID: 1000, GID: 1000, CapEff: "0000000000000000", CapBnd: "0000000000000000",
	NoNewPrivs: true, Seccomp: 2, ReadOnlyRoot: true, PidsMax: 512, MemoryMaxBytes: 1 << 30, CPUQuota: 2}

// serve is one bridge connection: hello, then claims and answers until
// the connection ends.
func (a *Agent) serve(w http.ResponseWriter, r *http.Request) {
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns[conn] = struct{}{}
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()
	defer conn.Close()
	var hello wire.Envelope
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != wire.TypeHello {
		return
	}
	var h wire.Hello
	if err := hello.Decode(&h); err != nil || h.Role != wire.RoleBridge || h.Thread == "" {
		_ = conn.WriteJSON(wire.ErrorEnvelope("", "", wire.CodeBadMessage, "want a bridge hello with a thread"))
		return
	}
	a.mu.Lock()
	hold := a.hold
	a.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-a.done:
			return
		}
	}
	posture := Posture
	_ = conn.WriteJSON(wire.MustNew(wire.TypeHello, h.Thread, "", wire.Hello{Version: wire.Version, Role: wire.RoleAgent, Software: "fake-agent", Posture: &posture}))
	for {
		var env wire.Envelope
		if err := conn.ReadJSON(&env); err != nil {
			return
		}
		var out []wire.Envelope
		switch {
		case env.Type == wire.TypeClaim:
			out = []wire.Envelope{a.claim(env)}
		case a.answer != nil:
			out = a.answer(env)
		}
		for _, e := range out {
			if err := conn.WriteJSON(e); err != nil {
				return
			}
		}
	}
}

// claim keeps a claim's LLM token and answers claimed; a claim without a
// token is a bad_message.
func (a *Agent) claim(env wire.Envelope) wire.Envelope {
	var c wire.Claim
	if err := env.Decode(&c); err != nil || c.LLMToken == "" {
		return wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "claim needs a token")
	}
	a.mu.Lock()
	a.tokens = append(a.tokens, c.LLMToken)
	a.mu.Unlock()
	return wire.MustNew(wire.TypeClaimed, env.Thread, env.ID, nil)
}
