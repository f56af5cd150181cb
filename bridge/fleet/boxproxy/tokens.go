package boxproxy

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// DefaultTokenTTL is how long a sandbox's LLM token is accepted after it
// was issued when llmproxy.Config.TokenTTL is zero.
const DefaultTokenTTL = 15 * time.Minute

// A sandbox's LLM proxy token (docs/security.md, "LLM proxy token") is
// random, short-lived and tied to one sandbox: it is issued when the
// sandbox's proxy starts, accepted for the TTL after it was issued, and
// replaced by the next one at half of that (SandboxToken), so the agent,
// which is handed the current one in a claim (at every greeting, and by
// its thread as it rotates), always holds one that is good. A new sandbox
// on the box (a replacement, a resumption, an adoption after a restart)
// starts anew: every token issued before is refused at once; a removed
// sandbox's proxy is gone with its socket.

// issued is one token and when it was issued.
type issued struct {
	tok string
	at  time.Time
}

// boxTokens are the tokens a box's proxy accepts: the current one and the
// one before, each until it expires.
type boxTokens struct {
	cur, prev issued
}

// tokenBook keeps every box's tokens.
type tokenBook struct {
	mu    sync.Mutex
	boxes map[string]*boxTokens
	now   func() time.Time
}

func (p *Proxies) ttl() time.Duration {
	if p.cfg.LLM.TokenTTL > 0 {
		return p.cfg.LLM.TokenTTL
	}
	return DefaultTokenTTL
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func (b *tokenBook) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// SandboxToken returns the current LLM proxy token of box id: issued now
// when the box has none (or its current one expired), the next one when
// the current one is past half its life (the one before stays good until
// it expires). It is safe for concurrent use.
func (p *Proxies) SandboxToken(id string) string {
	b := &p.tokens
	b.mu.Lock()
	defer b.mu.Unlock()
	now, ttl := b.clock(), p.ttl()
	bt := b.boxes[id]
	switch {
	case bt == nil || now.Sub(bt.cur.at) >= ttl:
		b.setLocked(id, &boxTokens{cur: issued{newToken(), now}})
	case now.Sub(bt.cur.at) >= ttl/2:
		bt.prev, bt.cur = bt.cur, issued{newToken(), now}
	}
	return b.boxes[id].cur.tok
}

// LiveTokens returns the tokens box id's proxy accepts now (the current
// one and the one before while it is good), issuing none: secrets to mask
// wherever the sandbox's output goes. It is safe for concurrent use.
func (p *Proxies) LiveTokens(id string) []string {
	b := &p.tokens
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := b.boxes[id]
	if bt == nil {
		return nil
	}
	now, ttl := b.clock(), p.ttl()
	var out []string
	for _, t := range []issued{bt.cur, bt.prev} {
		if t.tok != "" && now.Sub(t.at) < ttl {
			out = append(out, t.tok)
		}
	}
	return out
}

// FreshTokens starts box id's tokens anew, for a new sandbox on it (a new
// proxy, or a sandbox recreated behind the same one): every token issued
// before is refused from now on.
func (p *Proxies) FreshTokens(id string) {
	b := &p.tokens
	b.mu.Lock()
	defer b.mu.Unlock()
	now, ttl := b.clock(), p.ttl()
	for other, bt := range b.boxes { // expired ones are refused anyway: removed boxes' go
		if now.Sub(bt.cur.at) >= ttl {
			delete(b.boxes, other)
		}
	}
	b.setLocked(id, &boxTokens{cur: issued{newToken(), now}})
}

func (b *tokenBook) setLocked(id string, bt *boxTokens) {
	if b.boxes == nil {
		b.boxes = map[string]*boxTokens{}
	}
	b.boxes[id] = bt
}

// acceptsToken reports whether tok is a token of box id that has not
// expired.
func (p *Proxies) acceptsToken(id, tok string) bool {
	b := &p.tokens
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := b.boxes[id]
	if bt == nil || tok == "" {
		return false
	}
	now, ttl := b.clock(), p.ttl()
	good := func(is issued) bool {
		return is.tok != "" && now.Sub(is.at) < ttl && subtle.ConstantTimeCompare([]byte(is.tok), []byte(tok)) == 1
	}
	return good(bt.cur) || good(bt.prev)
}
