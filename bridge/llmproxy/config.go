package llmproxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Config says where the proxy forwards to and with which key. The zero value
// of each optional field means its default.
type Config struct {
	// Upstream is the OpenAI-compatible base URL including the version path,
	// e.g. "https://api.openai.com/v1". Required.
	Upstream string
	// APIKey is sent upstream as "Authorization: Bearer <key>". It may be
	// empty for endpoints without auth (a local Ollama, say).
	APIKey string
	// HTTPClient sends the upstream requests; nil means a client without an
	// overall timeout (streams may be long) whose transport bounds dialing
	// and waiting for response headers.
	HTTPClient *http.Client
	// Logger receives the proxy's logs; nil discards them.
	Logger *slog.Logger

	// Token, when set, must arrive as "Authorization: Bearer <Token>" on
	// every call; others are answered 401. The bridge gives each sandbox a
	// random token of its own, valid only on that sandbox's socket.
	Token string
	// Accept, when set, decides whether a call's bearer token is good
	// instead of Token (the bridge's tokens that expire and rotate,
	// bridge/fleet/boxproxy); it must not block.
	Accept func(token string) bool
	// RedactForModel, when set, masks secrets in the text of the tool
	// messages of each chat completion before it goes upstream, returning
	// the text and how many it masked: the model never sees them, and is
	// told (RedactedNote). The bridge gives the policy's redact values,
	// credentials and patterns and its own secrets (docs/approvals.md).
	RedactForModel func(text string) (string, int)
	// TokenTTL is how long the bridge accepts a sandbox's token after it
	// issued it; it issues the next one at half of that and hands it to
	// the agent (bridge/fleet/boxproxy). Zero means the bridge's default.
	// The proxy itself only asks Accept.
	TokenTTL time.Duration
	// Models is the model allowlist; empty allows any model.
	Models []string
	// RequestsPerMinute caps model calls in any 60-second window; 0 means
	// no cap.
	RequestsPerMinute int
	// TokenBudget caps the total tokens (as the upstream reports them) of
	// all calls through this proxy; 0 means no cap. A call that starts
	// under the budget may end over it; the next one is refused.
	TokenBudget int
	// OnUsage, when set, is called after every forwarded chat completion
	// with its usage and the running totals. It must not block.
	OnUsage func(UsageReport)
	// OnRefused, when set, is called when a budget or the model allowlist
	// refuses a call, with the reason. It must not block.
	OnRefused func(Refusal)
	// OnCall, when set, is called once for every chat completion the
	// proxy answered with this sandbox's token, after its answer ended
	// (GET /v1/models is not a call): how it went, how long it took and
	// the tokens the upstream reported (GET /metrics). It must not block.
	OnCall func(Call)
	// Admit, when set, is asked before each chat completion is forwarded
	// (after the proxy's own budgets); an error refuses the call with 429
	// and the error's text, like a spent budget. It must not block long.
	Admit func() error
}

// Usage is a call's token counts as the upstream reported them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// UsageReport is passed to Config.OnUsage.
type UsageReport struct {
	Model       string
	Call, Total Usage
	Requests    int
	TokenBudget int
}

// Outcomes of a model call (Call.Outcome).
const (
	// OutcomeOK: the upstream answered 2xx and the answer reached the
	// caller whole.
	OutcomeOK = "ok"
	// OutcomeRefused: the proxy answered itself: a bad request, a model
	// outside the allowlist, a spent budget or Config.Admit.
	OutcomeRefused = "refused"
	// OutcomeError: the upstream answered an error status.
	OutcomeError = "error"
	// OutcomeUnreachable: the upstream could not be reached or did not
	// answer in time.
	OutcomeUnreachable = "unreachable"
	// OutcomeCut: the answer broke off midway.
	OutcomeCut = "cut"
	// OutcomeCanceled: the caller went away before the answer ended.
	OutcomeCanceled = "canceled"
)

// Call is one chat completion as Config.OnCall is told of it.
type Call struct {
	// Model is the model the request named; Stream whether it streamed.
	Model  string
	Stream bool
	// Outcome says how it went: one of the Outcome constants.
	Outcome string
	// Duration is from the request's arrival to the end of its answer.
	Duration time.Duration
	// Usage is what the upstream reported of the call's tokens (in the
	// last chunk of a streamed answer); HasUsage is false when it
	// reported none.
	Usage    Usage
	HasUsage bool
}

// Refusal is passed to Config.OnRefused. Budget says a budget (not the
// model allowlist) refused the call.
type Refusal struct {
	Budget bool
	Reason string
}

const redacted = "[redacted]"

// String prints the configuration with the key redacted.
func (c Config) String() string {
	return fmt.Sprintf("llmproxy.Config{Upstream: %q, APIKey: %s, Token: %s}", c.Upstream, c.redactedKey(), redactIfSet(c.Token))
}

// LogValue logs the configuration with the key redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("upstream", c.Upstream),
		slog.String("api_key", c.redactedKey()),
		slog.String("token", redactIfSet(c.Token)),
		slog.Any("models", c.Models),
		slog.Int("requests_per_minute", c.RequestsPerMinute),
		slog.Int("token_budget", c.TokenBudget),
	)
}

// GoString keeps %#v from printing the key.
func (c Config) GoString() string { return c.String() }

func (c Config) redactedKey() string {
	if c.APIKey == "" {
		return "(none)"
	}
	return redacted
}

func redactIfSet(s string) string {
	if s == "" {
		return "(none)"
	}
	return redacted
}
