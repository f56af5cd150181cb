package session

import "github.com/boxwire/boxwire/bridge/wire"

// claim applies a bridge's claim of this pooled sandbox (docs/pool.md): it
// hands the LLM proxy token to Config.Claim and answers claimed. Only a
// connection whose hello said role bridge may claim; the bridge never
// forwards a client's claim. The connection's thread is the one its hello
// named, so nothing else changes.
func (c *conn) claim(env wire.Envelope) {
	name := c.thread.name
	if c.role != wire.RoleBridge || c.s.cfg.Claim == nil {
		c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeNotAllowed, "claim is only for the bridge of a pooled sandbox"))
		return
	}
	var cl wire.Claim
	if err := env.Decode(&cl); err != nil || cl.LLMToken == "" {
		c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "claim needs an llm_token"))
		return
	}
	c.s.cfg.Claim(cl.LLMToken)
	c.log.Info("claimed by the bridge")
	c.reply(wire.MustNew(wire.TypeClaimed, name, env.ID, nil))
}
