package llmproxy

import (
	"fmt"
	"log/slog"
	"net/http"
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
	// Logger receives the proxy's logs; nil means slog.Default().
	Logger *slog.Logger
}

const redacted = "[redacted]"

// String prints the configuration with the key redacted.
func (c Config) String() string {
	return fmt.Sprintf("llmproxy.Config{Upstream: %q, APIKey: %s}", c.Upstream, c.redactedKey())
}

// LogValue logs the configuration with the key redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("upstream", c.Upstream),
		slog.String("api_key", c.redactedKey()),
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
