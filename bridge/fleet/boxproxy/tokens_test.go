package boxproxy

import (
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/llmproxy"
)

// TestTokens: a box's token is good for its TTL, the next one is issued
// at half of it (the one before staying good until it expires), a new
// sandbox on the box refuses every earlier token at once, and a token is
// good only for its own box.
func TestTokens(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := New(Config{LLM: llmproxy.Config{TokenTTL: 10 * time.Minute}})
	p.tokens.now = func() time.Time { return now }
	at := func(d time.Duration) { now = time.Unix(1_000_000, 0).Add(d) }

	p.FreshTokens("a")
	t1 := p.SandboxToken("a")
	if len(t1) != 64 || !p.acceptsToken("a", t1) || p.acceptsToken("b", t1) || p.acceptsToken("a", "") {
		t.Fatalf("first token %q", t1)
	}
	at(4 * time.Minute)
	if p.SandboxToken("a") != t1 {
		t.Errorf("rotated before half its life")
	}
	at(5 * time.Minute)
	t2 := p.SandboxToken("a")
	if t2 == t1 || !p.acceptsToken("a", t1) || !p.acceptsToken("a", t2) {
		t.Errorf("at half its life: t2 %q, t1 good %v, t2 good %v", t2, p.acceptsToken("a", t1), p.acceptsToken("a", t2))
	}
	at(10 * time.Minute)
	if p.acceptsToken("a", t1) || !p.acceptsToken("a", t2) {
		t.Errorf("at t1's expiry: t1 good %v, t2 good %v", p.acceptsToken("a", t1), p.acceptsToken("a", t2))
	}
	at(25 * time.Minute) // nobody asked: t2 expired too
	if p.acceptsToken("a", t2) {
		t.Errorf("t2 good after its expiry")
	}
	t3 := p.SandboxToken("a")
	if t3 == t2 || !p.acceptsToken("a", t3) {
		t.Errorf("after expiry: a new token is issued")
	}
	p.FreshTokens("a") // the sandbox was replaced
	if p.acceptsToken("a", t3) {
		t.Errorf("the replaced sandbox's token is still good")
	}
	if t4 := p.SandboxToken("a"); t4 == t3 || !p.acceptsToken("a", t4) {
		t.Errorf("the new sandbox's token %q", t4)
	}
	p.FreshTokens("b")
	at(40 * time.Minute)
	p.FreshTokens("c") // drops the expired books of a and b
	if len(p.tokens.boxes) != 1 {
		t.Errorf("expired books kept: %d", len(p.tokens.boxes))
	}
}
