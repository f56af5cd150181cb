package llmscript

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxBodyBytes bounds a request body; larger requests are answered 413.
const maxBodyBytes = 32 << 20

// Options configures a [Server]. The zero value serves without auth and
// without logging.
type Options struct {
	// APIKey, when set, is required on every request as
	// "Authorization: Bearer <APIKey>" (or an "api-key" header); other
	// requests are answered 401.
	APIKey string
	// Logger receives one debug line per request; nil discards.
	Logger *slog.Logger
}

// LogValue keeps the key out of logs.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("api_key_set", o.APIKey != ""))
}

// Request is one recorded HTTP request. Its slices and maps belong to the
// recording: read them, do not modify them.
type Request struct {
	// Method and Path are the request's method and URL path.
	Method string
	Path   string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Chat is the decoded chat-completions request; zero for other paths
	// and for bodies that do not decode.
	Chat openai.ChatCompletionRequest
}

// Server is an http.Handler answering OpenAI chat-completions requests
// from a [Script]. It keeps no per-conversation state, so any number of
// conversations may use it at once; it is safe for concurrent use.
// A Server owns no goroutines: each request is served on the caller's.
type Server struct {
	script Script
	apiKey string
	log    *slog.Logger
	ids    atomic.Uint64

	mu       sync.Mutex
	requests []Request
}

// New returns a Server answering from script. New does not validate the
// script (see [Script.Validate]); a step with several answers set answers
// with its error if any, else with its text and tool calls together.
func New(script Script, opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{script: script, apiKey: opts.APIKey, log: log}
}

// Requests returns a copy of the list of requests received so far, in
// arrival order, including rejected ones.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// ServeHTTP routes /v1/chat/completions and /v1/models (the /v1 prefix is
// optional). It returns when the answer is written, the request's context
// ends, or the client goes away.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	path := r.URL.Path
	if path == "/v1" || strings.HasPrefix(path, "/v1/") {
		path = strings.TrimPrefix(path, "/v1")
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var decodeErr error
	if path == "/chat/completions" && readErr == nil {
		decodeErr = json.Unmarshal(body, &rec.Chat)
	}
	s.record(rec)
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "bytes", len(body))

	switch {
	case !s.authorized(r):
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided.",
			"invalid_request_error", "invalid_api_key")
	case readErr != nil:
		writeError(w, http.StatusRequestEntityTooLarge, "read request body: "+readErr.Error(), "", "")
	case path == "/chat/completions":
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		if decodeErr != nil {
			writeError(w, http.StatusBadRequest, "invalid JSON body: "+decodeErr.Error(), "", "")
			return
		}
		s.chat(w, r, rec.Chat)
	case path == "/models":
		if allowMethod(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []model{s.modelInfo()}})
		}
	case strings.HasPrefix(path, "/models/"):
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		if id := strings.TrimPrefix(path, "/models/"); id != s.script.model() {
			writeError(w, http.StatusNotFound, fmt.Sprintf("The model '%s' does not exist", id),
				"invalid_request_error", "model_not_found")
			return
		}
		writeJSON(w, http.StatusOK, s.modelInfo())
	default:
		writeError(w, http.StatusNotFound, "Unknown request URL: "+r.Method+" "+r.URL.Path, "", "unknown_url")
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

// authorized reports whether r carries the configured key.
func (s *Server) authorized(r *http.Request) bool {
	if s.apiKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got = r.Header.Get("api-key")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.apiKey)) == 1
}

// chat answers one chat-completions request.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, req openai.ChatCompletionRequest) {
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "'messages' must not be empty", "", "")
		return
	}
	a := s.script.pick(req.Messages)
	if err := sleep(r.Context(), a.delay); err != nil {
		// The client is gone or the server is shutting down; in the
		// latter case the client still reads this.
		writeError(w, http.StatusServiceUnavailable, "request ended: "+err.Error(), "", "")
		return
	}
	if a.err != nil {
		writeError(w, a.err.Status, a.err.Message, a.err.Type, a.err.Code)
		return
	}
	c := completion{
		id:      fmt.Sprintf("chatcmpl-scripted-%d", s.ids.Add(1)),
		created: time.Now().Unix(),
		model:   req.Model,
		answer:  a,
		usage:   usageFor(req, a),
	}
	if c.model == "" {
		c.model = s.script.model()
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, c.response())
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	if err := c.stream(r.Context(), w, includeUsage); err != nil {
		s.log.Debug("stream ended early", "path", r.URL.Path, "err", err)
	}
}

// model is one entry of the /v1/models list.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

func (s *Server) modelInfo() model {
	return model{ID: s.script.model(), Object: "model", Created: 0, OwnedBy: "llmscript"}
}

// errorBody is the OpenAI error shape.
type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError answers status with an OpenAI-style error body. An empty
// typ is derived from status; an empty code is sent as null.
func writeError(w http.ResponseWriter, status int, msg, typ, code string) {
	writeJSON(w, status, newErrorBody(status, msg, typ, code))
}

func newErrorBody(status int, msg, typ, code string) errorBody {
	b := errorBody{Error: apiError{Message: msg, Type: typ}}
	if typ == "" {
		b.Error.Type = errorType(status)
	}
	if code != "" {
		b.Error.Code = &code
	}
	return b
}

// errorType is the OpenAI error type usual for an HTTP status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" not allowed; use "+method, "", "")
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait %v: %w", d, context.Cause(ctx))
	}
}

// errClientGone reports that a write to the client failed.
var errClientGone = errors.New("client gone")
