package fleet

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/fleet/boxproxy"
	"github.com/boxwire/boxwire/bridge/fleet/find"
	"github.com/boxwire/boxwire/bridge/fleet/greet"
	"github.com/boxwire/boxwire/bridge/fleet/pace"
	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/fleet/warm"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Lifecycle defaults.
const (
	DefaultIdleTTL      = 30 * time.Minute
	DefaultMaxLifetime  = 24 * time.Hour
	DefaultThreadTTL    = 72 * time.Hour
	DefaultRecycleGrace = 5 * time.Minute
	// DefaultPoolIdle is how long a pool waits for a thread before it
	// shrinks.
	DefaultPoolIdle = 10 * time.Minute
)

// ErrLimit: MaxSandboxes are live. ErrClosing: the fleet is stopping.
var (
	ErrLimit   = errors.New("sandbox limit reached")
	ErrClosing = errors.New("bridge shutting down")
)

// Config configures a Fleet. Zero values of optional fields mean their
// defaults. The server fills it from its own Config (see server.Config for
// what each field means to an operator).
type Config struct {
	// Manager creates and removes sandboxes. Required; the fleet does not
	// close it.
	Manager sandbox.Manager
	// Layout lays out each sandbox's host folders. Required.
	Layout *boxdir.Layout
	// Records keeps thread records. Required.
	Records Records
	// Logger receives the fleet's logs; nil discards them.
	Logger *slog.Logger
	// BridgeID is the boxwire.owner label of the fleet's sandboxes.
	// Required.
	BridgeID string
	// Token is the secret each sandbox's LLM proxy token derives from
	// (the bridge's client token). Required.
	Token string
	// Software names the bridge in its hello to agents.
	Software string
	// Model is passed to the agent as BOXWIRE_MODEL when set.
	Model string
	// SandboxUID and SandboxGID run the sandbox.
	SandboxUID, SandboxGID int
	// DataDir holds the egress CA (<DataDir>/ca).
	DataDir string

	// Image is the default image; Images the others a thread may ask for.
	Image  string
	Images []string
	// Runtime is the default OCI runtime; Runtimes the others allowed.
	Runtime  string
	Runtimes []string
	// MaxSandboxes bounds the live and pooled sandboxes; 0: no bound.
	MaxSandboxes int
	// IdleTTL, MaxLifetime, ThreadTTL, RecycleGrace, ReapInterval: see
	// server.Config.
	IdleTTL, MaxLifetime, ThreadTTL, RecycleGrace, ReapInterval time.Duration
	// Rollout paces how live sandboxes move to a rebuilt image (pace).
	Rollout RolloutConfig
	// AgentBinary, when set, is a host file mounted read-only over the
	// image's agent binary in every new sandbox (sandbox.Spec.AgentBinary):
	// a developer's build serves without an image rebuild.
	AgentBinary string
	// Pool is how many greeted sandboxes the warm pool keeps per image
	// (0: none); PoolIdle empties an image's pool nobody took from.
	Pool     int
	PoolIdle time.Duration

	// LLM configures each sandbox's LLM proxy.
	LLM llmproxy.Config
	// UsageEvents publishes a usage event to a sandbox's members after
	// every model call.
	UsageEvents bool
	// LLMAdmit, when set, is asked before each model call of the sandbox
	// box is forwarded; an error refuses it (a user's daily tokens are
	// spent). LLMUsage, when set, is told each call's total tokens.
	LLMAdmit func(box string) error
	LLMUsage func(box string, tokens int)
	// Egress is the bridge's egress allowlist; EgressThreadMax caps the
	// rules a thread may ask for.
	Egress, EgressThreadMax []string
	// Policy holds the credentials and host rules the egress proxies
	// apply; EgressRoots verifies real hosts behind terminated TLS.
	Policy      *policy.Policy
	EgressRoots *x509.CertPool
	// Posture is what each agent's hello must report; nil checks nothing.
	Posture *PosturePolicy

	// Check decides one egress request of the sandbox with box id boxID
	// after the box's own rules were matched (req.AllowedBy); nil leaves
	// it to the allowlist.
	Check func(ctx context.Context, boxID string, req egress.Request) egress.Verdict
	// EgressDecided, when set, is told every decision of every sandbox's
	// egress proxy (GET /metrics); it must not block.
	EgressDecided func(egress.Decision)
	// Adopt takes back thread rec of box b, adopted by Reconcile: it greets
	// the agent (Greet), makes the member and attaches it (Attach). An
	// error gives the sandbox up.
	Adopt func(ctx context.Context, b *Box, rec ThreadRecord) error
	// Claim, when set, takes the lease of a thread-scope sandbox's thread
	// before the sandbox is adopted (its sockets served again); an error
	// that is ErrRelayedElsewhere leaves the sandbox to the bridge that
	// relays it (handover.go).
	Claim func(ctx context.Context, thread string) error
	// ClaimShared, when set, takes the leases of every live thread of
	// the shared (assistant-scope) sandbox of box before the sandbox is
	// adopted: one bridge relays all the threads of a shared sandbox.
	// An error that is ErrRelayedElsewhere leaves the sandbox to the
	// bridge that relays them (handover.go).
	ClaimShared func(ctx context.Context, box string) error
}

// ThreadRecord is what the bridge keeps about a thread apart from its live
// connections (records.Thread).
type ThreadRecord = records.Thread

// Records keeps thread records (records.Store).
type Records = records.Store

// Member is one thread of a box. Working and Attached are called with the
// fleet's lock held and must not call into the Fleet; Publish and Suspend
// are called without it.
type Member interface {
	// ID is the thread id.
	ID() string
	// Working reports whether a turn or tool call runs.
	Working() bool
	// Attached reports whether a client is attached.
	Attached() bool
	// Publish adds an event of the sandbox's proxies to the thread's log.
	// It must not block on clients.
	Publish(env wire.Envelope)
	// Suspend ends the thread because the fleet suspended its sandbox: it
	// logs ev, closes its clients with it and stops. It blocks until the
	// thread stopped.
	Suspend(ev wire.SandboxExited)
}

// Fleet owns the sandboxes of one bridge. It is safe for concurrent use.
type Fleet struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	bg     sync.WaitGroup // the reaper, started by New

	mu     sync.Mutex
	closed bool
	boxes  map[string]*Box  // by box key, including boxes being created
	pool   *warm.Pool[*Box] // the warm pool (bridge/fleet/warm; its host: pool.go); its filler is started by New
	// life are the per-thread and per-box lifecycle locks (locks.go).
	life Locks
	px   *boxproxy.Proxies // each box's LLM and egress proxies
	book records.Book      // the stored threads' questions and updates
	// reaper and rec are the reaper (reaper.go) and Reconcile's adoption
	// (reconcile.go), working on these boxes.
	reaper reaper
	rec    reconciler
	find   find.Finder // the engine's running sandboxes (bridge/fleet/find)
	rep    replacer    // replacing boxes' sandboxes (lifecycle.go)
	// greeter greets agents; rules keeps the boxes' own egress rules
	// (egress.go).
	greeter *greet.Greeter
	rules   boxRules
	// roll is the rollout to rebuilt images (bridge/fleet/pace); imgs the
	// images threads may use (rollout.go).
	roll *pace.Rollout
	imgs Images
}

// New checks cfg and returns a fleet with its reaper (and pool filler)
// running; [Fleet.Stop] stops and waits for them.
func New(cfg Config) (*Fleet, error) {
	switch {
	case cfg.Manager == nil:
		return nil, errors.New("fleet: sandbox manager is required")
	case cfg.Layout == nil:
		return nil, errors.New("fleet: folder layout is required")
	case cfg.Records == nil:
		return nil, errors.New("fleet: thread records are required")
	case cfg.BridgeID == "":
		return nil, errors.New("fleet: bridge id is required")
	}
	if _, err := egress.ParseRules(cfg.Egress); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if _, err := egress.ParseRules(cfg.EgressThreadMax); err != nil {
		return nil, fmt.Errorf("fleet: thread egress cap: %w", err)
	}
	cfg = defaults(cfg)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{cfg: cfg, log: log, ctx: ctx, cancel: cancel, boxes: map[string]*Box{}}
	f.reaper.f, f.rec.f, f.rules.f, f.rep.f = f, f, f, f
	f.find = find.Finder{Manager: cfg.Manager, Layout: cfg.Layout, Log: log}
	f.book = records.Book{Store: cfg.Records, Log: log}
	f.px = boxproxy.New(boxproxy.Config{LLM: cfg.LLM, Token: cfg.Token, UsageEvents: cfg.UsageEvents,
		LLMAdmit: cfg.LLMAdmit, LLMUsage: cfg.LLMUsage, Egress: cfg.Egress, EgressThreadMax: cfg.EgressThreadMax,
		Policy: cfg.Policy, EgressRoots: cfg.EgressRoots, DataDir: cfg.DataDir, Check: cfg.Check,
		Decided: cfg.EgressDecided, Publish: f.publish, Rules: f.rules.of})
	f.greeter = greet.New(greet.Config{Software: cfg.Software, Engine: cfg.Manager, Posture: cfg.Posture,
		Token: f.px.SandboxToken, Logger: log})
	f.roll, f.imgs = pace.New(cfg.Rollout), Images{f: f, allowed: slices.Clone(cfg.Images)}
	f.pool = warm.New(ctx, warm.Config{Lock: &f.mu, Size: cfg.Pool, Idle: cfg.PoolIdle, MaxAge: cfg.MaxLifetime / 2,
		Max: cfg.MaxSandboxes, Tick: cfg.ReapInterval, Default: warm.Key{Image: cfg.Image, Runtime: cfg.Runtime}, Logger: log},
		poolHost{f}) // before the reaper, which reads the pool
	f.bg.Add(1)
	go f.reaper.reap()
	return f, nil
}

// defaults fills the lifecycle fields of cfg.
func defaults(cfg Config) Config {
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = DefaultIdleTTL
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = min(30*time.Second, cfg.IdleTTL/4)
	}
	cfg.ReapInterval = max(cfg.ReapInterval, 50*time.Millisecond)
	if cfg.ThreadTTL <= 0 {
		cfg.ThreadTTL = DefaultThreadTTL
	}
	if cfg.RecycleGrace <= 0 {
		cfg.RecycleGrace = DefaultRecycleGrace
	}
	if cfg.PoolIdle <= 0 {
		cfg.PoolIdle = DefaultPoolIdle
	}
	if cfg.SandboxUID == 0 {
		cfg.SandboxUID = 1000
	}
	if cfg.SandboxGID == 0 {
		cfg.SandboxGID = 1000
	}
	return cfg
}

// Stop refuses new sandboxes, stops the reaper and the pool's filler and
// waits for them, and removes the pooled sandboxes no thread took. Boxes
// keep running. It is idempotent.
func (f *Fleet) Stop(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.cancel()
	f.mu.Unlock()
	f.bg.Wait()
	return f.pool.Close(ctx)
}

// Close waits for the boxes being created (Stop cancelled their
// creation) and closes every box's proxies; sandboxes, workspace volumes
// and folders stay for the next start's Reconcile. Call it after Stop,
// once the members stopped.
func (f *Fleet) Close() error {
	f.mu.Lock()
	boxes := slices.Collect(maps.Values(f.boxes))
	f.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		<-b.ready // creation stops: f.ctx is cancelled
		if b.err == nil {
			if err := b.res.closeProxies(); err != nil {
				errs = append(errs, fmt.Errorf("box %s: %w", b.id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Locks returns the fleet's lifecycle locks (Locks).
func (f *Fleet) Locks() *Locks { return &f.life }

// Members returns the members of the box whose id is id.
func (f *Fleet) Members(id string) []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ms []Member
	for _, b := range f.boxes {
		if b.id == id {
			for _, m := range b.members {
				ms = append(ms, m)
			}
		}
	}
	return ms
}

// isMember reports whether thread id is a member of a box.
func (f *Fleet) isMember(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.boxes {
		if _, ok := b.members[id]; ok {
			return true
		}
	}
	return false
}

// publish publishes env as an event of every member of the box whose id
// is id. It does not block on clients.
func (f *Fleet) publish(id string, env wire.Envelope) {
	for _, m := range f.Members(id) {
		e := env
		e.Thread = m.ID()
		m.Publish(e)
	}
}

// every calls fn with the time every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func(now time.Time)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			fn(now)
		}
	}
}
