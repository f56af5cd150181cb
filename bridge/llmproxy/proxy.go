package llmproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits and timeouts of the default upstream client and of requests.
const (
	// dialTimeout bounds connecting to the upstream.
	dialTimeout = 10 * time.Second
	// responseHeaderTimeout bounds waiting for the upstream's status line;
	// a slow non-streaming completion can take minutes.
	responseHeaderTimeout = 5 * time.Minute
	// maxRequestBytes caps a request body (a long conversation with tool
	// results fits easily).
	maxRequestBytes = 32 << 20
	// copyBufferBytes is the read size when streaming the answer.
	copyBufferBytes = 32 << 10
)

// routes are the only requests the proxy forwards: method by path.
var routes = map[string]string{
	"/v1/chat/completions": http.MethodPost,
	"/v1/models":           http.MethodGet,
}

// forwardedHeaders are the request headers passed upstream; everything else
// (Authorization, cookies, hop-by-hop headers) is dropped.
var forwardedHeaders = []string{"Content-Type", "Accept", "User-Agent", "OpenAI-Beta", "X-Request-Id"}

// Proxy is an http.Handler that forwards OpenAI-compatible requests to the
// upstream with the configured key. It is safe for concurrent use; a
// request blocks until the upstream answer is fully streamed or either side
// goes away.
type Proxy struct {
	base      *url.URL
	key       string
	token     string
	accept    func(string) bool // Config.Accept
	models    []string
	client    *http.Client
	log       *slog.Logger
	meter     *meter
	onUsage   func(UsageReport)
	onRefused func(Refusal)
	onCall    func(Call)
	admitHook func() error

	redactModel func(string) (string, int) // Config.RedactForModel (redact.go)
}

// New checks cfg and returns a proxy. It starts nothing.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("llmproxy: upstream is required")
	}
	base, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("llmproxy: parse upstream: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("llmproxy: upstream %q is not an http(s) URL", cfg.Upstream)
	}
	if cfg.RequestsPerMinute < 0 || cfg.TokenBudget < 0 {
		return nil, errors.New("llmproxy: budgets must not be negative")
	}
	p := &Proxy{
		base: base, key: cfg.APIKey, token: cfg.Token, accept: cfg.Accept, redactModel: cfg.RedactForModel, models: cfg.Models,
		client: cfg.HTTPClient, log: cfg.Logger,
		meter:   &meter{rpm: cfg.RequestsPerMinute, budget: cfg.TokenBudget, now: time.Now},
		onUsage: cfg.OnUsage, onRefused: cfg.OnRefused, onCall: cfg.OnCall, admitHook: cfg.Admit,
	}
	if p.client == nil {
		p.client = NewHTTPClient()
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// NewHTTPClient returns the client a proxy uses when Config.HTTPClient is
// nil: no overall timeout (streams may be long), with dialing and the wait
// for response headers bounded. One client may serve many proxies, which
// then share its upstream connections; its owner calls
// CloseIdleConnections when done.
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: tr}
}

// ServeHTTP forwards one request; see the package documentation.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if !p.authorized(r) {
		p.log.Warn("llm call without this sandbox's token", "path", r.URL.Path)
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "missing or wrong sandbox token")
		return
	}
	method, ok := routes[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown path "+r.URL.Path)
		return
	}
	if r.Method != method {
		writeError(w, http.StatusNotFound, "invalid_request_error", r.Method+" "+r.URL.Path+" is not supported")
		return
	}
	if r.Method != http.MethodPost {
		p.forward(w, r, nil) // GET /v1/models: no model call
		return
	}
	body, chat, ok := p.admit(w, r)
	call := Call{Model: chat.Model, Stream: chat.Stream, Outcome: OutcomeRefused}
	if ok {
		var scan *usageScanner
		if call.Outcome, scan = p.forward(w, r, body); scan != nil {
			call.Usage, call.HasUsage = p.recordUsage(chat.Model, scan)
		}
	}
	call.Duration = time.Since(start)
	if p.onCall != nil {
		p.onCall(call)
	}
}

// forward sends r, with body, upstream and streams the answer back. It
// returns how the call went (an Outcome) and, for an answer of a 2xx
// status, the scanner that watched it for usage.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte) (string, *usageScanner) {
	out, err := p.outgoing(r, body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "proxy_error", p.redact(err.Error()))
		return OutcomeError, nil
	}
	start := time.Now()
	resp, err := p.client.Do(out)
	if err != nil {
		return p.upstreamFailed(w, r, err), nil
	}
	defer resp.Body.Close()
	p.log.Debug("llm upstream answered", "path", r.URL.Path, "status", resp.StatusCode,
		"after", time.Since(start).Round(time.Millisecond))
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	scan := &usageScanner{sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	outcome := OutcomeOK
	if err := stream(w, io.TeeReader(resp.Body, scan)); err != nil {
		outcome = OutcomeCanceled
		if r.Context().Err() == nil {
			outcome = OutcomeCut
			p.log.Warn("llm stream cut", "path", r.URL.Path, "err", p.redact(err.Error()))
		}
	}
	if resp.StatusCode >= 300 {
		p.log.Warn("llm upstream refused", "path", r.URL.Path, "status", resp.StatusCode)
		return OutcomeError, nil
	}
	return outcome, scan
}

// admit reads a chat completion request and applies the allowlist and the
// budgets. It answers the caller itself when it returns false.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request) ([]byte, chatRequest, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error",
			fmt.Sprintf("request body unreadable or over %d bytes", maxRequestBytes))
		return nil, chatRequest{}, false
	}
	data, chat, err := prepareChat(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return nil, chat, false
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if red, n := p.redactForModel(data, bearer); n > 0 { // redact.go
		data = red
		p.log.Info("masked secrets in tool output before the model saw it", "count", n)
	}
	if !p.modelAllowed(chat.Model) {
		p.refuse(w, http.StatusForbidden, false, fmt.Sprintf("model %q is not allowed by the bridge", chat.Model))
		return nil, chat, false
	}
	if reason, ok := p.meter.admit(); !ok {
		p.refuse(w, http.StatusTooManyRequests, true, reason)
		return nil, chat, false
	}
	if p.admitHook != nil {
		if err := p.admitHook(); err != nil {
			p.refuse(w, http.StatusTooManyRequests, true, err.Error())
			return nil, chat, false
		}
	}
	return data, chat, true
}

// recordUsage counts a finished call and reports it; it returns the
// call's usage and whether the upstream reported one.
func (p *Proxy) recordUsage(model string, scan *usageScanner) (Usage, bool) {
	u, err := scan.result()
	if err != nil {
		p.log.Debug("llm usage unknown", "model", model, "err", err)
	}
	rep := p.meter.record(model, u)
	p.log.Info("llm call", "model", model, "tokens", u.TotalTokens, "thread_tokens", rep.Total.TotalTokens,
		"calls", rep.Requests)
	if p.onUsage != nil {
		p.onUsage(rep)
	}
	return u, err == nil
}

// outgoing builds the upstream request: the path under /v1 joined onto the
// base, the body as is, the key as the only credential.
func (p *Proxy) outgoing(r *http.Request, data []byte) (*http.Request, error) {
	target := *p.base
	target.Path = strings.TrimSuffix(p.base.Path, "/") + strings.TrimPrefix(r.URL.Path, "/v1")
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	var body io.Reader
	if r.Method == http.MethodPost {
		body = bytes.NewReader(data)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), body)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	out.ContentLength = int64(len(data))
	for _, h := range forwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			out.Header[h] = v
		}
	}
	if p.key != "" {
		out.Header.Set("Authorization", "Bearer "+p.key)
	}
	return out, nil
}

// upstreamFailed answers a request whose upstream could not be reached,
// and returns the call's Outcome.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) string {
	if r.Context().Err() != nil {
		p.log.Debug("llm request abandoned by caller", "path", r.URL.Path)
		return OutcomeCanceled
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error",
			fmt.Sprintf("request body over %d bytes", maxErr.Limit))
		return OutcomeRefused
	}
	msg := p.redact(err.Error())
	status, text := http.StatusBadGateway, "llm upstream unreachable: "+msg
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		status, text = http.StatusGatewayTimeout, "llm upstream timed out: "+msg
	}
	p.log.Warn("llm upstream failed", "path", r.URL.Path, "status", status, "err", msg)
	writeError(w, status, "upstream_error", text)
	return OutcomeUnreachable
}

// redact removes the key from s, in case an error ever echoes it.
func (p *Proxy) redact(s string) string {
	if p.key == "" {
		return s
	}
	return strings.ReplaceAll(s, p.key, redacted)
}

// hopHeaders are response headers that describe one connection, not the
// answer, and are not copied back.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

func copyHeaders(dst, src http.Header) {
	for k, v := range src {
		if !hopHeaders[k] {
			dst[k] = v
		}
	}
}

// stream copies body to w, flushing after every write so each SSE chunk
// leaves as soon as it arrives. It returns when body ends or fails.
func stream(w http.ResponseWriter, body io.Reader) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, copyBufferBytes)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return fmt.Errorf("write to caller: %w", werr)
			}
			if ferr := rc.Flush(); ferr != nil {
				return fmt.Errorf("flush to caller: %w", ferr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read upstream: %w", err)
		}
	}
}

// apiError is the OpenAI error body: {"error": {...}}.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	var body apiError
	body.Error.Message = msg
	body.Error.Type = typ
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
