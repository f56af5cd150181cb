package fleet

// LLMToken returns the current LLM proxy token of b's sandbox, the next
// one once the current one is past half its life (boxproxy.SandboxToken):
// the thread hands it to the agent in a claim. It is safe for concurrent
// use.
func (b *Box) LLMToken() string { return b.px.SandboxToken(b.id) }

// LLMTokens returns the LLM proxy tokens b's sandbox may use now
// (boxproxy.LiveTokens), issuing none: the thread masks them in what the
// sandbox sends its clients and the log.
func (b *Box) LLMTokens() []string { return b.px.LiveTokens(b.id) }
