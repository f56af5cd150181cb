// Package llmproxy is the bridge's OpenAI-compatible reverse proxy: the only
// place that holds the model endpoint's API key.
//
// A sandbox's agent points its OpenAI base URL at the proxy, which it reaches
// through a unix socket in the sandbox's own socket folder (see
// [Proxy.Serve]). The proxy accepts POST /v1/chat/completions and
// GET /v1/models, maps the path onto the configured upstream base URL,
// replaces any Authorization header with the real key, and streams the
// answer back unbuffered, so server-sent events arrive as they are produced.
// Upstream failures are answered with OpenAI-style JSON errors that never
// contain the key; [Config] redacts the key when printed or logged.
package llmproxy
