package llmproxy

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// window is the span RequestsPerMinute counts over.
const window = time.Minute

// meter counts one proxy's calls and tokens and enforces its budgets. It is
// safe for concurrent use.
type meter struct {
	rpm, budget int
	now         func() time.Time

	mu       sync.Mutex
	recent   []time.Time // admitted calls within the last window, oldest first
	total    Usage
	requests int
}

// admit records a call about to be made, or returns why it may not be.
func (m *meter) admit() (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.budget > 0 && m.total.TotalTokens >= m.budget {
		return fmt.Sprintf("thread token budget of %d tokens is spent (%d used)", m.budget, m.total.TotalTokens), false
	}
	now := m.now()
	cut := 0
	for cut < len(m.recent) && now.Sub(m.recent[cut]) >= window {
		cut++
	}
	m.recent = m.recent[cut:]
	if m.rpm > 0 && len(m.recent) >= m.rpm {
		wait := window - now.Sub(m.recent[0])
		return fmt.Sprintf("thread request budget of %d model calls per minute is spent; retry in %s",
			m.rpm, wait.Round(time.Second)), false
	}
	m.recent = append(m.recent, now)
	return "", true
}

// record adds a finished call's usage and returns the report for it.
func (m *meter) record(model string, u Usage) UsageReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	m.total.PromptTokens += u.PromptTokens
	m.total.CompletionTokens += u.CompletionTokens
	m.total.TotalTokens += u.TotalTokens
	return UsageReport{Model: model, Call: u, Total: m.total, Requests: m.requests, TokenBudget: m.budget}
}

// authorized reports whether r carries the proxy's token (always, when the
// proxy has none).
func (p *Proxy) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case p.accept != nil:
		return ok && p.accept(got)
	case p.token == "":
		return true
	}
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(p.token)) == 1
}

// modelAllowed applies the allowlist.
func (p *Proxy) modelAllowed(model string) bool {
	return len(p.models) == 0 || slices.Contains(p.models, model)
}

// refuse answers a call a budget or the allowlist refused and reports it.
func (p *Proxy) refuse(w http.ResponseWriter, status int, budget bool, reason string) {
	p.log.Warn("llm call refused", "reason", reason)
	if p.onRefused != nil {
		p.onRefused(Refusal{Budget: budget, Reason: reason})
	}
	typ := "model_not_allowed"
	if budget {
		typ = "budget_exceeded"
	}
	writeError(w, status, typ, reason)
}
