package server

import (
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/boxproxy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// minTokenCheck bounds how often a thread looks whether its sandbox's
// LLM token rotated.
const minTokenCheck = 250 * time.Millisecond

// rotateTokens hands the agent each new LLM proxy token of the thread's
// sandbox in a claim (docs/security.md, "LLM proxy token"): the bridge
// issues the next token at half the old one's life and accepts the old
// one until it expires, and this looks eight times a life. It runs on a
// goroutine of the thread's (wg) until the thread ends.
func (t *thread) rotateTokens() {
	defer t.wg.Done()
	ttl := t.srv.cfg.LLM.TokenTTL
	if ttl <= 0 {
		ttl = boxproxy.DefaultTokenTTL
	}
	tick := time.NewTicker(max(ttl/8, minTokenCheck))
	defer tick.Stop()
	last := "" // the greeting claimed one; the first look hands the agent the current one again
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		tok := t.srv.fleet.LLMToken(t.box)
		if tok == last {
			continue
		}
		last = tok
		t.log.Info("llm token rotated; handing the agent the new one")
		t.sendAgent(wire.MustNew(wire.TypeClaim, t.id, "rotate", wire.Claim{LLMToken: tok}))
	}
}
