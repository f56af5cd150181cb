package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/config"
	"github.com/boxwire/boxwire/bridge/failover"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/forward"
	"github.com/boxwire/boxwire/bridge/hostcheck"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/lease"
	"github.com/boxwire/boxwire/bridge/metrics"
	"github.com/boxwire/boxwire/bridge/readiness"
	"github.com/boxwire/boxwire/bridge/retention"
	"github.com/boxwire/boxwire/bridge/rollout"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/threadops"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/web"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Config configures a Server: bridge/config's (its fields, defaults and
// checks).
type Config = config.Config

// Lifecycle defaults (bridge/fleet).
const (
	DefaultIdleTTL      = fleet.DefaultIdleTTL
	DefaultMaxLifetime  = fleet.DefaultMaxLifetime
	DefaultThreadTTL    = fleet.DefaultThreadTTL
	DefaultRecycleGrace = fleet.DefaultRecycleGrace
	DefaultPoolIdle     = fleet.DefaultPoolIdle
)

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
	leases  *lease.Book    // this bridge's leases in the store (leases.go)
	// llmClient carries every sandbox's LLM proxy calls upstream, so
	// they share connections; Close closes its idle ones.
	llmClient *http.Client
	// web are the browser logins and the page (bridge/web).
	web *web.Sessions
	// users says who each request comes from and what they may do
	// (bridge/users, users.go); roll is the rollout API (bridge/rollout).
	users *users.Users
	roll  rollout.API
	// ops describes threads and changes their sandboxes for the threads
	// API (bridge/threadops, over liveThreads: threadapi.go).
	ops *threadops.Ops
	// metrics is GET /metrics (bridge/metrics, metrics.go).
	metrics *metrics.Metrics
	// fwd serves the clients whose thread another bridge relays
	// (bridge/forward, forward.go); made with the first, under mu.
	fwd *forward.Hub
	// fo is fail-over between bridges on a shared store (bridge/failover,
	// failover.go), made by New.
	fo *failover.Failover
}

// New checks cfg and returns a server. It starts its fleet's reaper (and
// warm pool) and the store's retention, which [Server.Close] stops and
// waits for; call [Server.Reconcile] before serving [Server.Handler] to
// adopt the sandboxes of an earlier run.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.Checked() // required fields, defaults (bridge/config)
	if err != nil {
		return nil, err
	}
	db, err := openStore(&cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		threads: make(map[string]*thread),
		clients: make(map[*client]struct{}),
		db:      db, events: db,
		llmClient: cfg.LLM.HTTPClient,
	}
	s.leases = lease.New(db, cfg.BridgeID, cfg.LeaseTTL, cfg.Logger)
	if err := s.newMetrics(); err != nil { // metrics.go
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	if err := s.leases.ClaimBridge(ctx); err != nil { // a second bridge with this id stops here
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	// Users, keys and the audit log live in the same store (bridge/auth);
	// bridge/users applies them.
	authn, err := auth.New(auth.Config{AdminToken: cfg.Token, Store: db.Accounts(), OIDC: cfg.OIDC, Logger: cfg.Logger})
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	shared, _ := db.(web.SharedSessions) // PostgreSQL: one session for every bridge on it
	if s.web, err = web.New(ctx, web.Config{Auth: authn, Store: db.Accounts(), AdminToken: cfg.Token, TTL: cfg.SessionTTL,
		File: web.SessionsFile(cfg.DataDir), Shared: shared, InsecureHTTP: cfg.InsecureHTTP, OIDC: cfg.OIDCLogin, Logger: cfg.Logger}); err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	s.users = users.New(users.Config{Authn: authn, Authenticate: s.web.Authenticate, Forbidden: web.ErrCSRF,
		Threads: threadDirectory{s}, Limits: cfg.UserLimits, Sessions: s.web})
	s.fo = s.newFailover() // failover.go
	if s.fleet, err = fleet.New(s.fleetConfig()); err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("server: %w", err), db.Close())
	}
	s.ops = threadops.New(threadops.Config{Threads: liveThreads{s}, Fleet: s.fleet, Records: cfg.Store, Events: db,
		Manager: cfg.Manager, Owners: s.users, ThreadTTL: cfg.ThreadTTL, Log: s.log, Server: ctx,
		Elsewhere: s.relayedElsewhere}) // forwardhttp.go
	s.roll = rollout.API{Images: s.fleet.Images(), Log: s.log, Image: cfg.Image, Reload: cfg.ReloadImages}
	s.pruner.Add(2)
	go func() { defer s.pruner.Done(); retention.Run(ctx, retentionOf(s)) }() // bridge/retention, retention.go
	go func() { defer s.pruner.Done(); s.leases.Run(ctx, s.fo) }()            // bridge/failover
	return s, nil
}

// fleetConfig is the fleet's part of the server's config (Config.Fleet),
// with the server's hooks: the records without other bridges' threads
// (leases.go), the users' model-call quota and token count, egress
// approvals that ask the clients of a sandbox's threads (approvals.go),
// Reconcile's adopted threads made here (reconcile.go), and each thread's
// lease taken before its sandbox is touched (a peer's is left to it,
// failover.go), every live thread's of a shared one
// (bridge/failover).
func (s *Server) fleetConfig() fleet.Config {
	c := s.cfg.Fleet() // bridge/config
	c.Records, c.Logger = lease.OwnRecords{Records: s.cfg.Store, Book: s.leases}, s.log
	c.LLMAdmit, c.LLMUsage = s.users.AdmitModelCall, s.users.CountTokens // bridge/users
	c.Check, c.Adopt, c.Claim = s.egressCheck, s.adoptThread, s.leases.Acquire
	c.ClaimShared = func(ctx context.Context, box string) error { // bridge/failover
		_, _, end, err := s.fo.ClaimShared(ctx, box, "")
		end()
		return err
	}
	c.LLM.OnCall, c.EgressDecided = s.modelCalled, s.egressDecided // GET /metrics (metrics.go)
	return c
}

// Handler returns the HTTP API: GET /v1/ws, the threads API (POST and GET
// /v1/threads, GET and DELETE /v1/threads/{id}) and GET /healthz. Everything but /healthz needs the bearer token.
func (s *Server) Handler() http.Handler {
	mux, u := http.NewServeMux(), s.users
	pv, guard := s.newPreview() // ports, preview URLs, public links, forwards (preview.go)
	// A thread another bridge relays is previewed there (forwardhttp.go);
	// its host form and public links are this bridge's own.
	pv.Routes(mux, func(h http.Handler) http.Handler { return guard(s.relayedHTTP(h)) })
	mux.HandleFunc("GET /readyz", readiness.Handler(readiness.Checks{Store: s.db.Ping, Engine: s.cfg.Manager.Ping})) // bridge/readiness
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET "+wire.Path, u.Auth(http.HandlerFunc(s.serveWS)))
	s.threadRoutes(mux)                                      // the threads API (bridge/threadapi) and file transfers: threadapi.go
	u.Routes(mux)                                            // GET /v1/users/me, the admin API (bridge/users, bridge/auth)
	s.roll.Routes(mux, u.Admin, u.Audited)                   // GET and POST /v1/rollout (bridge/rollout)
	s.roll.ImagesRoute(mux, u.Auth)                          // GET /v1/images: the allowed image names, to anyone (bridge/rollout)
	mux.Handle("GET /metrics", u.Admin(s.metrics.Handler())) // bridge/metrics, metrics.go
	s.web.Routes(mux)                                        // browser sessions and the page at / (bridge/web)
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
	if err := s.leases.Release(ctx); err != nil { // another bridge may take the threads now
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
	if err := s.leases.Acquire(ctx, t.id); err != nil { // leases.go
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

// liveThreads returns every live thread, in no order.
func (s *Server) liveThreads() []*thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	threads := make([]*thread, 0, len(s.threads))
	for _, t := range s.threads {
		threads = append(threads, t)
	}
	return threads
}

// untilClose is ctx, also ended when the server closes. The caller must
// call cancel.
func (s *Server) untilClose(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// errClosing: a thread registered while the server closes.
var errClosing = fleet.ErrClosing
