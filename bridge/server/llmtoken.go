package server

import (
	"context"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/boxproxy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// minTokenCheck bounds how often a thread looks whether its sandbox's
// LLM token rotated.
const minTokenCheck = 250 * time.Millisecond

// watchTokens hands the agent each new LLM proxy token of the thread's
// sandbox in a claim (docs/security.md, "LLM proxy token"): the bridge
// issues the next token at half the old one's life and accepts the old
// one until it expires, and this looks eight times a life. It looks from
// a timer's function, so an idle thread keeps no goroutine for it (a
// goroutine's stack was 7 KiB of every idle session); the timer stops
// when the thread ends.
func (t *thread) watchTokens() {
	ttl := t.srv.cfg.LLM.TokenTTL
	if ttl <= 0 {
		ttl = boxproxy.DefaultTokenTTL
	}
	every := max(ttl/8, minTokenCheck)
	var (
		mu    sync.Mutex
		timer *time.Timer
		last  string // the greeting claimed one; the first look hands the agent the current one again
	)
	look := func() {
		mu.Lock()
		defer mu.Unlock()
		if t.ctx.Err() != nil {
			return
		}
		if tok := t.box.LLMToken(); tok != last {
			last = tok
			t.log.Info("llm token rotated; handing the agent the new one")
			t.sendAgent(wire.MustNew(wire.TypeClaim, t.id, "rotate", wire.Claim{LLMToken: tok}))
		}
		timer.Reset(every)
	}
	mu.Lock()
	timer = time.AfterFunc(every, look)
	mu.Unlock()
	context.AfterFunc(t.ctx, func() { timer.Stop() })
}
