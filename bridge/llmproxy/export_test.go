package llmproxy

// Totals returns the usage and call count recorded so far.
func (p *Proxy) Totals() (Usage, int) {
	p.meter.mu.Lock()
	defer p.meter.mu.Unlock()
	return p.meter.total, p.meter.requests
}
