package session

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/forward"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// DefaultThread is the thread a hello with an empty thread binds to.
const DefaultThread = "local"

// HTTP server limits.
const (
	readHeaderTimeout = 10 * time.Second
	shutdownGrace     = 5 * time.Second
)

// Config configures a Server. Zero values mean defaults; Model is required.
type Config struct {
	// Loop configures the LLM tool loop: the model, the tools, the system
	// prompt, the step limit and the conversation budget. Its Logger
	// defaults to Logger.
	Loop loop.Config
	// Token, when set, is required as "Authorization: Bearer <Token>" on
	// the upgrade request; others are answered 401. The agent's main makes
	// it mandatory on TCP.
	Token string
	// Software names this build in the hello answer, e.g. "boxwire-agent/0.1.0".
	Software string
	// AgentHash, when set, gives what every hello answer reports: the
	// SHA-256 of the agent's binary, "sha256:<hex>" (wire.Hello.AgentHash;
	// "" for none). It may block until the hash is known (the agent hashes
	// its binary while it starts and listens, not before); it is called
	// outside the session's locks, once per hello.
	AgentHash func() string
	// Started, when set, is closed once the agent's start is complete (its
	// thread reserve made, agent/threads): a request that can start a
	// process (a turn, run_tool, a terminal request) is served only after
	// it; the hello, pings and the claim do not wait. Nil: at once.
	Started <-chan struct{}
	// Greeted, when set, is called once, on a goroutine of its own, after
	// the first hello is answered: the agent's start, a sandbox's greeting
	// included, is then behind it (agent/cli gives back the mappings of
	// its start-up code, agent/codepages). Close waits for it.
	Greeted func()
	// Files, when set, serves wire.FilesPath (file transfers, agent/files)
	// behind the same token check as the WebSocket.
	Files http.Handler
	// Terminal configures the terminal sessions (agent/terminal); its Dir
	// defaults to Workspace.
	Terminal terminal.Config
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Posture, when set, is reported in every hello answer (the bridge
	// checks it; see agent/posture).
	Posture *wire.Posture
	// Claim, when set, applies a bridge's claim of a pooled sandbox: the
	// sandbox's LLM proxy token (wire.TypeClaim, claim.go). It must not
	// block. Nil refuses claims.
	Claim func(llmToken string)
	// Forward configures each connection's port streams (agent/forward);
	// its Thread and Logger are set per connection.
	Forward forward.Config
	// PortsInterval is how often the agent looks at what listens in the
	// sandbox, to send a ports event when it changes; 0 never looks.
	PortsInterval time.Duration
	// CheckReconnectWait is how long a tool check waiting for approval
	// waits for a bridge connection to come back after its own closed
	// (approval.go); 0 means DefaultCheckReconnectWait.
	CheckReconnectWait time.Duration
}

// LogValue logs the config without the token.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("workspace", c.Loop.Workspace),
		slog.Int("tools", len(c.Loop.Tools)),
		slog.Bool("token_set", c.Token != ""),
		slog.String("software", c.Software),
	)
}

// Server serves the protocol. It is an http.Handler for wire.Path and owns
// every goroutine it starts (connection pumps and turns): Close stops them
// all and waits for them. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	loop     *loop.Loop
	instance string // random per process: a bridge's resume names it (backlog.go)
	greeted  sync.Once
	upgrader websocket.Upgrader

	// hard ends when the server closes: live connections and turns stop.
	hard     context.Context
	stopHard context.CancelFunc

	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup // connection handlers and turns
	threads map[string]*thread
	terms   terminalRegistry // created on first use (terminal.go)
	checks  checks           // tool checks waiting for the bridge (approval.go)
	hosts   hostWaits        // host tool requests waiting for the bridge (hosttools.go)

	portsOnce sync.Once   // starts watchPorts (forward.go)
	ports     []wire.Port // what listens now, as last reported
}

// New returns a Server for cfg. It starts nothing; serve it with Run or
// mount it as an http.Handler.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Loop.Logger == nil {
		cfg.Loop.Logger = log
	}
	hard, stop := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg,
		log: log,
		upgrader: websocket.Upgrader{
			ReadBufferSize:  readBufferSize,
			WriteBufferSize: writeBufferSize,
		},
		hard:     hard,
		stopHard: stop,
		threads:  make(map[string]*thread),
		instance: newInstance(),
	}
	if cfg.Loop.Check == nil {
		cfg.Loop.Check = s.checkTool // asks the bridge, if there is one (approval.go)
	}
	own := cfg.Loop.TurnTools // e.g. the image's MCP servers' tools
	cfg.Loop.TurnTools = func(ctx context.Context) []tools.Tool {
		var ts []tools.Tool
		if own != nil {
			ts = own(ctx)
		}
		return append(ts, s.hostTools(ctx)...) // hosttools.go: the bridge's
	}
	s.loop = loop.New(cfg.Loop)
	return s
}

// Run serves HTTP on ln until ctx ends or Close is called, then closes the
// server: it stops accepting, ends live connections and running turns, and
// waits for all of them. Run closes ln. It returns nil after such a
// shutdown, else the error that stopped serving.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case <-s.hard.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = hs.Shutdown(sctx) // hijacked WebSocket connections are ours to end
	if serveErr == nil {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	s.Close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), serveErr)
	}
	return nil
}

// Close ends every connection and running turn and waits for their
// goroutines. Requests that arrive afterwards are answered 503. Close is
// idempotent and safe to call concurrently with anything.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopHard()
	s.wg.Wait()
	s.closeTerminals()
}

// track registers one goroutine with the server, unless it is closed.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// ServeHTTP authenticates and upgrades a request to wire.Path and serves
// the connection; it blocks until the connection ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.Path && (r.URL.Path != wire.FilesPath || s.cfg.Files == nil) {
		http.NotFound(w, r)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="boxwire"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path == wire.FilesPath {
		s.cfg.Files.ServeHTTP(w, r)
		return
	}
	if !s.track() {
		http.Error(w, "server closing", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.log.Debug("upgrade failed", "remote", r.RemoteAddr, "err", err)
		return // the upgrader has answered
	}
	c := newConn(s, ws, s.log.With("remote", r.RemoteAddr))
	c.serve()
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// thread returns the named thread, creating it on first use.
func (s *Server) thread(name string) *thread {
	s.mu.Lock()
	t, ok := s.threads[name]
	if !ok {
		t = newThread(s, name)
		s.threads[name] = t
	}
	s.mu.Unlock()
	if !ok {
		s.portsForNew(t) // without s.mu: the thread's lock comes first (forward.go)
	}
	return t
}
