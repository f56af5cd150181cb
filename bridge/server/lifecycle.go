package server

import (
	"github.com/boxwire/boxwire/bridge/wire"
)

// Working reports whether t's agent runs a turn or a tool call
// (fleet.Member: a busy sandbox counts as used, and is recycled only
// after its work or a grace).
func (t *thread) Working() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.Busy()
}

// AgentResumed takes the agent's account of its work from its resumed
// answer (agentlink.Thread).
func (t *thread) AgentResumed(r wire.Resumed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events.Resumed(r)
}
