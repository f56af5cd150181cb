package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/hostcheck"
	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/retention"
	"github.com/boxwire/boxwire/bridge/rollout"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/web"
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
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Software names this build in hello, e.g. "boxwire-bridge/0.1.0".
	Software string
	// MaxUploadBytes caps one file upload request (files.go); default
	// DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// AllowedHosts are the host names (besides IP addresses and
	// localhost) that clients may name in their Host header; "*" allows
	// any. Others get 421 (bridge/hostcheck), which keeps DNS-rebound pages
	// out.
	AllowedHosts []string
	// OIDC, when set, also accepts bearer JWTs of an identity provider
	// (auth.NewOIDCVerifier); users are the ones its claim names.
	OIDC *auth.OIDCVerifier
	// UserLimits are the limits of users who have none of their own
	// (sandboxes at a time); zero means no limit. Admins have none.
	UserLimits auth.Limits
	// SessionTTL is how long a browser login lasts (bridge/web); default
	// web.DefaultSessionTTL.
	SessionTTL time.Duration
	// InsecureHTTP lets the page and its login be served over plain HTTP
	// beyond loopback (bridge/web).
	InsecureHTTP bool
	// TLSCert and TLSKey, both set, make Run serve HTTPS with that
	// certificate and key (PEM files).
	TLSCert, TLSKey string
	// OIDCLogin, when set, lets the page sign in with the OIDC provider
	// (bridge/web); OIDC must accept its ID tokens.
	OIDCLogin *web.OIDCLogin

	// HostTools, when set, are the operator's host tools (bridge/hosttools,
	// docs/tools.md) the threads' agents may call; the server closes it.
	HostTools *hosttools.Host

	// PreviewDomain turns on preview URLs of the host form,
	// {port}-{thread}.{PreviewDomain} (bridge/preview); empty leaves the
	// path form only.
	PreviewDomain string

	// Images are the images a thread may ask for besides Image.
	Images []string
	// Runtime is the OCI runtime of sandboxes ("" = the engine's default);
	// Runtimes are the others a thread may ask for (e.g. "runsc").
	Runtime  string
	Runtimes []string
	// MaxSandboxes bounds the live sandboxes; 0 means no bound.
	MaxSandboxes int
	// IdleTTL removes a sandbox nobody has used (no client attached, no
	// traffic) for this long; default DefaultIdleTTL.
	IdleTTL time.Duration
	// MaxLifetime removes a sandbox this long after its creation, in use
	// or not; default DefaultMaxLifetime.
	MaxLifetime time.Duration
	// ThreadTTL removes a suspended thread (no sandbox: idle TTL) with its
	// log and workspace volume this long after it was suspended; default
	// DefaultThreadTTL. DELETE removes one at once.
	ThreadTTL time.Duration
	// RecycleGrace is how long a sandbox past its maximum lifetime waits
	// for its running turns and run_tool calls to end before it is
	// replaced anyway; default DefaultRecycleGrace.
	RecycleGrace time.Duration
	// ReapInterval is how often the reaper looks for expired sandboxes;
	// default the smaller of 30s and IdleTTL/4.
	ReapInterval time.Duration
	// Rollout paces how live sandboxes move to a rebuilt image; Reload
	// and ReloadImages reload Images (rollout_api.go); AgentBinary is a
	// host agent binary mounted into new sandboxes (fleet.Config).
	Rollout      fleet.RolloutConfig
	Reload       <-chan os.Signal
	ReloadImages func() ([]string, error)
	AgentBinary  string
	// StoreURL is where the bridge keeps threads, events, users, leases
	// and approvals (OpenStore): "" for the bbolt file
	// <DataDir>/boxwire.db, or a postgres:// URL (docs/store.md).
	StoreURL string
	// Store keeps thread records; default the store above (see store.go).
	Store ThreadStore
	// Retention bounds the event log in the store file (bridge/store);
	// zero fields keep everything. Pruning runs every RetentionInterval
	// (default 10m).
	Retention         store.Retention
	RetentionInterval time.Duration
	// MaxStoredOutput caps the tool_output bytes of one call kept in the
	// log; default DefaultMaxStoredOutput.
	MaxStoredOutput int
	// StoreSync is the store's fsync interval (store.Options.SyncInterval):
	// zero fsyncs every commit before its events are sent.
	StoreSync time.Duration
	// LeaseTTL is how long this bridge's leases in the store (its own id,
	// its threads) last unrenewed; default DefaultLeaseTTL (leases.go).
	LeaseTTL time.Duration
	// AdvertiseURL is where the other bridges on the store reach this one
	// to forward it the clients of its threads (forward.go); default the
	// address Run listens on, when that names a host.
	AdvertiseURL string

	// Egress is the egress allowlist (see egress.ParseRules); empty means
	// sandboxes get no egress proxy and so no network at all.
	Egress []string
	// EgressThreadMax caps the egress rules a thread may ask for
	// (wire.CreateThread.Egress): each must fall within one of these rules
	// (egress.Rule.Within). Empty, the default, refuses every thread's
	// request; set, every sandbox gets an egress proxy (egress_thread.go).
	EgressThreadMax []string
	// Posture is what each agent's hello must report; nil checks nothing.
	Posture *PosturePolicy
	// UsageEvents publishes a usage event to a sandbox's threads after
	// every model call its LLM proxy forwarded.
	UsageEvents bool

	// Policy decides which tool calls, egress hosts and credential uses
	// are allowed, denied or asked about, and holds the host-held
	// credentials (docs/approvals.md); nil allows every tool call and
	// leaves egress to the allowlist. A thread may put rules of its own
	// in front (wire.CreateThread.Policy).
	Policy *policy.Policy
	// EgressRoots verifies the real hosts behind TLS the egress proxy
	// terminates to add a credential; nil means the system's roots.
	EgressRoots *x509.CertPool

	// Pool is how many started, greeted sandboxes the warm pool keeps per
	// image for new thread-scope threads (docs/pool.md); 0 turns it off.
	// PoolIdle (default DefaultPoolIdle) empties an image's pool nobody
	// took from for that long, until a thread asks for the image again.
	Pool     int
	PoolIdle time.Duration
}

// Lifecycle defaults (bridge/fleet).
const (
	DefaultIdleTTL      = fleet.DefaultIdleTTL
	DefaultMaxLifetime  = fleet.DefaultMaxLifetime
	DefaultThreadTTL    = fleet.DefaultThreadTTL
	DefaultRecycleGrace = fleet.DefaultRecycleGrace
	DefaultPoolIdle     = fleet.DefaultPoolIdle
)

// LogValue logs the configuration without the token or the key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("image", c.Image), slog.String("data_dir", c.DataDir),
		slog.Any("llm", c.LLM), slog.String("model", c.Model),
		slog.String("bridge_id", c.BridgeID), slog.String("software", c.Software),
		slog.Any("images", c.Images), slog.String("runtime", c.Runtime), slog.Any("runtimes", c.Runtimes),
		slog.Int("max_sandboxes", c.MaxSandboxes), slog.Duration("idle_ttl", c.IdleTTL),
		slog.Duration("max_lifetime", c.MaxLifetime),
	)
}

// Server serves the bridge API and owns every thread it creates; the
// sandboxes the threads run in belong to its fleet (bridge/fleet). It is
// safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: stops thread creation
	cancel context.CancelFunc
	connID atomic.Uint64
	fleet  *fleet.Fleet // the sandboxes; lock order: s.mu before the fleet's

	mu      sync.Mutex
	closed  bool
	threads map[string]*thread
	clients map[*client]struct{}
	db      store.Backend  // the store (Config.StoreURL); closed by Close
	events  eventStore     // db, as the threads use it
	conns   sync.WaitGroup // connection handlers, so Close can wait for them
	pruner  sync.WaitGroup // the retention and lease goroutines, started by New
	leases  *leases        // this bridge's leases in the store (leases.go)
	// llmClient carries every sandbox's LLM proxy calls upstream, so
	// they share connections; Close closes its idle ones.
	llmClient *http.Client
	// web are the browser logins and the page (bridge/web).
	web *web.Sessions
	// users says who each request comes from and what they may do
	// (bridge/users, users.go); roll is the rollout API (bridge/rollout).
	users *users.Users
	roll  rollout.API
}

// New checks cfg and returns a server. It starts its fleet's reaper (and
// warm pool) and the store's retention, which [Server.Close] stops and
// waits for; call [Server.Reconcile] before serving [Server.Handler] to
// adopt the sandboxes of an earlier run.
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
	if _, err := egress.ParseRules(cfg.Egress); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if _, err := egress.ParseRules(cfg.EgressThreadMax); err != nil {
		return nil, fmt.Errorf("server: thread egress cap: %w", err)
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
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Software == "" {
		cfg.Software = "boxwire-bridge/dev"
	}
	if cfg.LLM.HTTPClient == nil { // one for every sandbox's proxy
		cfg.LLM.HTTPClient = llmproxy.NewHTTPClient()
	}
	db, err := openStore(&cfg)
	if err != nil {
		return nil, err
	}
	cfg = lifecycleDefaults(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		threads: make(map[string]*thread),
		clients: make(map[*client]struct{}),
		db:      db, events: db,
		llmClient: cfg.LLM.HTTPClient,
	}
	s.leases = newLeases(db, cfg.BridgeID, cfg.LeaseTTL, cfg.Logger)
	if err := s.leases.claimBridge(ctx); err != nil { // a second bridge with this id stops here
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	// Users, keys and the audit log live in the same store (bridge/auth);
	// bridge/users applies them.
	authn, err := auth.New(auth.Config{AdminToken: cfg.Token, Store: db, OIDC: cfg.OIDC, Logger: cfg.Logger})
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	if s.web, err = web.New(ctx, web.Config{Auth: authn, Store: db, AdminToken: cfg.Token, TTL: cfg.SessionTTL,
		File: web.SessionsFile(cfg.DataDir), InsecureHTTP: cfg.InsecureHTTP, OIDC: cfg.OIDCLogin, Logger: cfg.Logger}); err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	s.users = users.New(users.Config{Authn: authn, Authenticate: s.web.Authenticate, Forbidden: web.ErrCSRF,
		Threads: threadDirectory{s}, Limits: cfg.UserLimits})
	if s.fleet, err = fleet.New(s.fleetConfig()); err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	s.roll = rollout.API{Fleet: s.fleet, Log: s.log, Image: cfg.Image, Reload: cfg.ReloadImages}
	s.pruner.Add(2)
	go func() { defer s.pruner.Done(); retention.Run(ctx, retentionOf(s)) }() // bridge/retention, retention.go
	go func() { defer s.pruner.Done(); s.leases.run(ctx, failover{s}) }()     // failover.go
	return s, nil
}

// fleetConfig is the fleet's part of the server's config, with the
// server's hooks: egress approvals ask the clients of a sandbox's threads
// (approvals.go), and Reconcile's adopted threads are made here
// (reconcile.go).
func (s *Server) fleetConfig() fleet.Config {
	c := s.cfg
	return fleet.Config{
		Manager: c.Manager, Records: ownRecords{c.Store, s.leases}, Logger: s.log, // not other bridges' threads (leases.go)
		Layout:   boxdir.New(boxdir.Config{Root: c.DataDir, UID: c.SandboxUID, GID: c.SandboxGID}),
		BridgeID: c.BridgeID, Token: c.Token, Software: c.Software, Model: c.Model,
		SandboxUID: c.SandboxUID, SandboxGID: c.SandboxGID, DataDir: c.DataDir,
		Image: c.Image, Images: c.Images, Runtime: c.Runtime, Runtimes: c.Runtimes,
		MaxSandboxes: c.MaxSandboxes, IdleTTL: c.IdleTTL, MaxLifetime: c.MaxLifetime,
		ThreadTTL: c.ThreadTTL, RecycleGrace: c.RecycleGrace, ReapInterval: c.ReapInterval,
		Pool: c.Pool, PoolIdle: c.PoolIdle, Rollout: c.Rollout, AgentBinary: c.AgentBinary,
		LLM: c.LLM, UsageEvents: c.UsageEvents, LLMAdmit: s.users.AdmitModelCall, LLMUsage: s.users.CountTokens, // bridge/users
		Egress: c.Egress, EgressThreadMax: c.EgressThreadMax, Policy: c.Policy, EgressRoots: c.EgressRoots,
		Posture: c.Posture,
		Check:   s.egressCheck,    // approvals.go
		Adopt:   s.adoptThread,    // reconcile.go
		Claim:   s.leases.acquire, // leases.go: a peer's sandbox is left to it (failover.go)
	}
}

// Handler returns the HTTP API: GET /v1/ws, the threads API (POST and GET
// /v1/threads, GET and DELETE /v1/threads/{id}) and GET /healthz. Everything but /healthz needs the bearer token.
func (s *Server) Handler() http.Handler {
	mux, u := http.NewServeMux(), s.users
	pv, guard := s.newPreview() // ports, preview URLs, public links, forwards (preview.go)
	pv.Routes(mux, guard)
	mux.HandleFunc("GET /readyz", s.serveReady) // leases.go
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET "+wire.Path, u.Auth(http.HandlerFunc(s.serveWS)))
	s.threadRoutes(mux)                                                   // the threads API (bridge/threadapi) and file transfers: threadapi.go
	u.Routes(mux)                                                         // GET /v1/users/me, the admin API (bridge/users, bridge/auth)
	s.roll.Routes(mux, u.Admin, u.Audited)                                // GET and POST /v1/rollout (bridge/rollout)
	s.roll.ImagesRoute(mux, u.Auth)                                       // GET /v1/images: the allowed image names, to anyone (bridge/rollout)
	mux.Handle("GET /metrics", u.Admin(http.HandlerFunc(s.serveMetrics))) // metrics.go
	s.web.Routes(mux)                                                     // browser sessions and the page at / (bridge/web)
	mux.Handle("/", u.Auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpjson.Error(w, http.StatusNotFound, wire.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})))
	return pv.Hosts(hostcheck.Handler(s.cfg.AllowedHosts, mux), guard) // preview hosts first, then the Host check
}

// Close stops the fleet's reaper and pool, closes every client and agent
// connection and every LLM proxy, and waits for connection handlers until
// ctx ends. It leaves sandboxes, workspace volumes and socket folders for
// the next start to adopt (see [Server.Reconcile]); [Collect] removes
// them. It is idempotent.
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
	s.pruner.Wait()
	s.web.Close()
	if err := s.fleet.Stop(ctx); err != nil { // removes unclaimed pooled sandboxes
		s.log.Error("close warm pool", "err", err)
	}

	var errs []error
	for _, t := range threads {
		t.shutdown(wire.Envelope{})
	}
	if s.cfg.HostTools != nil {
		_ = s.cfg.HostTools.Close() // after the threads: no call is left
	}
	if err := s.fleet.Close(); err != nil { // every box's proxies
		errs = append(errs, err)
	}
	s.llmClient.CloseIdleConnections() // the upstream connections all proxies shared
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("wait for connections: %w", ctx.Err()))
	}
	if err := s.leases.release(ctx); err != nil { // another bridge may take the threads now
		errs = append(errs, fmt.Errorf("release leases: %w", err))
	}
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	return errors.Join(errs...)
}

// register records a ready thread in the store and adds it to the server
// and to its box, unless the server is closing or the box is gone.
func (s *Server) register(ctx context.Context, t *thread, rec ThreadRecord) error {
	if err := s.leases.acquire(ctx, t.id); err != nil { // leases.go
		return err
	}
	if err := s.cfg.Store.Put(ctx, rec); err != nil {
		return fmt.Errorf("store thread: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosing
	}
	if err := s.fleet.Attach(t.box, t); err != nil {
		return err
	}
	s.threads[t.id] = t
	return nil
}

func (s *Server) lookup(id string) *thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads[id]
}

// untilClose is ctx, also ended when the server closes. The caller must
// call cancel.
func (s *Server) untilClose(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// errLimit, errClosing: see errorFor and the threads API.
var (
	errLimit   = fleet.ErrLimit
	errClosing = fleet.ErrClosing
)
