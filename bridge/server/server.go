package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Config configures a Server. Zero values of optional fields mean their
// defaults.
type Config struct {
	// Token is the bearer token clients must present. Required.
	Token string
	// Image is the sandbox image. Required.
	Image string
	// DataDir holds the bridge's state; sockets go under <DataDir>/run.
	// Required.
	DataDir string
	// Manager creates and removes sandboxes. Required; the server does not
	// close it.
	Manager sandbox.Manager
	// LLM configures each thread's LLM proxy (its Logger is replaced by the
	// thread's logger).
	LLM llmproxy.Config
	// Model is passed to the agent as BOXWIRE_MODEL when set.
	Model string
	// SandboxUID and SandboxGID own each socket folder and run the
	// sandbox; default 1000.
	SandboxUID, SandboxGID int
	// BridgeID is the boxwire.owner label on this bridge's sandboxes;
	// default the host name.
	BridgeID string
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// Software names this build in hello, e.g. "boxwire-bridge/0.1.0".
	Software string
}

// LogValue logs the configuration without the token or the key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("image", c.Image), slog.String("data_dir", c.DataDir),
		slog.Any("llm", c.LLM), slog.String("model", c.Model),
		slog.String("bridge_id", c.BridgeID), slog.String("software", c.Software),
	)
}

// Server serves the bridge API and owns every thread it creates. It is safe
// for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: stops thread creation
	cancel context.CancelFunc
	connID atomic.Uint64

	mu      sync.Mutex
	closed  bool
	threads map[string]*thread
	clients map[*client]struct{}
	conns   sync.WaitGroup // connection handlers, so Close can wait for them
}

// New checks cfg and returns a server. It starts nothing: serve
// [Server.Handler] and call [Server.Close] when done.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Token == "":
		return nil, errors.New("server: token is required")
	case cfg.Image == "":
		return nil, errors.New("server: image is required")
	case cfg.DataDir == "":
		return nil, errors.New("server: data dir is required")
	case cfg.Manager == nil:
		return nil, errors.New("server: sandbox manager is required")
	}
	if _, err := llmproxy.New(cfg.LLM); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.SandboxUID == 0 {
		cfg.SandboxUID = 1000
	}
	if cfg.SandboxGID == 0 {
		cfg.SandboxGID = 1000
	}
	if cfg.BridgeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("server: bridge id: %w", err)
		}
		cfg.BridgeID = host
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Software == "" {
		cfg.Software = "boxwire-bridge/dev"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		threads: make(map[string]*thread),
		clients: make(map[*client]struct{}),
	}, nil
}

// Handler returns the HTTP API: GET /v1/ws, DELETE /v1/threads/{id} and
// GET /healthz. Everything but /healthz needs the bearer token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET "+wire.Path, s.auth(http.HandlerFunc(s.serveWS)))
	mux.Handle("DELETE /v1/threads/{id}", s.auth(http.HandlerFunc(s.deleteThread)))
	mux.Handle("/", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})))
	return mux
}

// auth rejects requests without the bearer token, before any upgrade.
func (s *Server) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxwire"`)
			writeJSONError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// deleteThread removes a thread and everything it owns.
func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	t, ok := s.threads[id]
	delete(s.threads, id)
	s.mu.Unlock()
	if !ok {
		writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("thread %q not found", id))
		return
	}
	t.shutdown(wire.ErrorEnvelope(id, "", wire.CodeNotFound, "thread deleted"))
	if err := t.res.remove(r.Context(), s.cfg.Manager); err != nil {
		t.log.Error("remove thread", "err", err)
		writeJSONError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	t.log.Info("thread deleted")
	w.WriteHeader(http.StatusNoContent)
}

// Close removes every sandbox (with its workspace volume), proxy and socket
// folder this server created, and closes every client connection. It waits
// for connection handlers and removals until ctx ends. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	threads := s.threads
	s.threads = map[string]*thread{}
	for c := range s.clients {
		c.kick(closeGoingAway, "bridge shutting down", nil)
	}
	s.mu.Unlock()

	var errs []error
	for _, t := range threads {
		t.shutdown(wire.Envelope{})
		if err := t.res.remove(ctx, s.cfg.Manager); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("wait for connections: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// register adds a ready thread unless the server is closing.
func (s *Server) register(t *thread) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.threads[t.id] = t
	return true
}

func (s *Server) lookup(id string) *thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads[id]
}

// errorBody is the JSON body of an HTTP error.
type errorBody struct {
	Error wire.Error `json:"error"`
}

func writeJSONError(w http.ResponseWriter, status int, code wire.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: wire.Error{Code: code, Message: strings.TrimSpace(msg)}})
}
