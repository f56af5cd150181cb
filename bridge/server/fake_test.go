package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeManager is the shared fake sandbox.Manager (sandboxtest) whose
// sandboxes run fakeAgents.
type fakeManager struct {
	*sandboxtest.Manager[*fakeAgent]
	// backlog, when > 0, makes the agents of later sandboxes keep this
	// many events and resume (resume_test.go).
	backlog int
	// holdHellos, when set, makes the agents of later sandboxes answer
	// hellos only once it is closed.
	holdHellos atomic.Pointer[chan struct{}]
}

func newFakeManager() *fakeManager {
	m := &fakeManager{}
	m.Manager = sandboxtest.NewManager(func(spec sandbox.Spec) (*fakeAgent, error) {
		a, err := startFakeAgent(spec.AgentDir, spec.SocketDir)
		if err != nil {
			return nil, err
		}
		a.keepBacklog(m.backlog) // resume_test.go
		if hold := m.holdHellos.Load(); hold != nil {
			a.HoldHellos(*hold)
		}
		return a, nil
	})
	return m
}

// fakeAgent speaks the agent side of the protocol: the shared fake agent
// answers hello and takes the claim; this one echoes a user_message as a
// turn whose text comes from the LLM proxy, and answers ping. Its own seq
// starts at 100, so renumbering is visible.
type fakeAgent struct {
	*sandboxtest.Agent
	llm *http.Client

	seq   uint64
	seqMu sync.Mutex // guards seq and resume
	// resume, when set, keeps the newest events for a bridge's resume
	// (resume_test.go).
	resume *fakeResume
}

// envValue returns the value of key in KEY=VALUE pairs.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// startFakeAgent serves on agent.sock in agentDir, as the real agent does
// in its folder, and calls the LLM proxy on llm.sock in bridgeDir with the
// LLM token of the bridge's claim.
func startFakeAgent(agentDir, bridgeDir string) (*fakeAgent, error) {
	llmSock := filepath.Join(bridgeDir, "llm.sock")
	a := &fakeAgent{
		llm: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", llmSock)
			}}},
		seq: 99,
	}
	var err error
	if a.Agent, err = sandboxtest.StartAgent(agentDir, a.answer); err != nil {
		return nil, err
	}
	return a, nil
}

// Stop stops the shared agent and drops the LLM client's connections.
func (a *fakeAgent) Stop() {
	a.Agent.Stop()
	a.llm.CloseIdleConnections()
}

func (a *fakeAgent) event(typ wire.Type, id string, payload any) wire.Envelope {
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	a.seq++
	env := wire.MustNew(typ, "", id, payload)
	env.Seq = a.seq
	a.resume.keep(env)
	return env
}

func (a *fakeAgent) answer(env wire.Envelope) []wire.Envelope {
	if out, ok := a.approvalAnswer(env); ok { // approvals_test.go
		return out
	}
	if out, ok := a.lifecycleAnswer(env); ok { // lifecycle_test.go
		return out
	}
	if out, ok := a.resumeAnswer(env); ok { // resume_test.go
		return out
	}
	if out, ok := a.inflightAnswer(env); ok { // inflight_test.go
		return out
	}
	if out, ok := a.gapAnswer(env); ok { // inflight_test.go
		return out
	}
	if out, ok := a.turnEndAnswer(env); ok { // turnend_test.go
		return out
	}
	if out, ok := a.mcpAnswer(env); ok { // mcpservers_test.go
		return out
	}
	switch env.Type {
	case wire.TypePing: // the pong carries the ping's data back (relay_test.go)
		pong := wire.MustNew(wire.TypePong, "", env.ID, nil)
		pong.Data = env.Data
		return []wire.Envelope{pong}
	case wire.TypeInterrupt:
		return []wire.Envelope{a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonInterrupted})}
	case wire.TypeUserMessage:
		var m wire.UserMessage
		if err := env.Decode(&m); err != nil {
			return []wire.Envelope{wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "%v", err)}
		}
		out := []wire.Envelope{a.event(wire.TypeUserEcho, env.ID, m)}
		if n, ok := strings.CutPrefix(m.Text, "flood "); ok {
			var count int
			fmt.Sscan(n, &count)
			chunk := strings.Repeat("x", 16<<10)
			for range count {
				out = append(out, a.event(wire.TypeAssistantDelta, env.ID, wire.Text{Text: chunk}))
			}
			return append(out, a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop}))
		}
		text, err := a.askModel(m.Text)
		if err != nil {
			return append(out, a.event(wire.TypeError, env.ID, wire.Error{Code: wire.CodeLLM, Message: err.Error()}),
				a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonError}))
		}
		return append(out,
			a.event(wire.TypeAssistantDelta, env.ID, wire.Text{Text: text}),
			a.event(wire.TypeAssistantMessage, env.ID, wire.Text{Text: text}),
			a.event(wire.TypeTurnDone, env.ID, wire.TurnDone{Reason: wire.ReasonStop}))
	}
	return []wire.Envelope{wire.ErrorEnvelope("", env.ID, wire.CodeUnknownType, "fake agent: %s", env.Type)}
}

// askModel calls the bridge's LLM proxy the way the real agent does, with a
// made-up key that the proxy must replace.
func (a *fakeAgent) askModel(text string) (string, error) {
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, text)
	req, err := http.NewRequest(http.MethodPost, "http://boxwire-llm/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	// The sandbox's proxy token from the claim (sandboxtest.Agent), not a key.
	req.Header.Set("Authorization", "Bearer "+a.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.llm.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("llm status %d: %s", resp.StatusCode, data)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return "", errors.New("bad llm answer: " + string(data))
	}
	return out.Choices[0].Message.Content, nil
}
